#version 330
#extension GL_ARB_gpu_shader5 : enable
// The last full-resolution pass, compiled per effect set (FXAA, AO, BLOOM defines):
// FXAA on the scene colour (after Lottes' FXAA console variant, green as luma, the cross
// neighbourhood from two gathers: blend along the local edge direction), times ambient occlusion (blurred at its reduced resolution, upsampled
// bilinearly), plus bloom.
in vec2 fragTexCoord;
uniform sampler2D colorMap;
uniform sampler2D aoMap;
uniform sampler2D bloomMap;
uniform vec2 texel;          // 1 / output size
uniform float bloomStrength;
out vec4 finalColor;

vec3 fxaa(vec2 uv)
{
    // green as luma: two gathers fetch the centre and its 4 neighbours (N, S, E, W)
#ifdef GL_ARB_gpu_shader5
    vec4 g1 = textureGather(colorMap, uv - 0.5 * texel, 1);   // W, M, S, SW
    vec4 g2 = textureGather(colorMap, uv + 0.5 * texel, 1);   // N, NE, E, M
    float lM = g1.y, lW = g1.x, lS = g1.z, lN = g2.x, lE = g2.z;
#else
    float lM = texture(colorMap, uv).g;
    float lW = texture(colorMap, uv + vec2(-1.0, 0.0) * texel).g;
    float lE = texture(colorMap, uv + vec2( 1.0, 0.0) * texel).g;
    float lS = texture(colorMap, uv + vec2(0.0, -1.0) * texel).g;
    float lN = texture(colorMap, uv + vec2(0.0,  1.0) * texel).g;
#endif
    float lMin = min(lM, min(min(lN, lS), min(lE, lW)));
    float lMax = max(lM, max(max(lN, lS), max(lE, lW)));
    vec3 rgbM = texture(colorMap, uv).rgb;
    if (lMax - lMin < max(0.0625, lMax * 0.166)) return rgbM;   // only real edges
    // blend along the edge: perpendicular to the luma gradient
    vec2 dir = vec2(lN - lS, lW - lE) * 2.0;
    float reduce = max((lN + lS + lE + lW) * 0.25 * 0.125, 1.0 / 128.0);
    float scale = 1.0 / (min(abs(dir.x), abs(dir.y)) + reduce);
    dir = clamp(dir * scale, vec2(-8.0), vec2(8.0)) * texel;
    vec3 a = 0.5 * (texture(colorMap, uv + dir * (1.0 / 3.0 - 0.5)).rgb
                  + texture(colorMap, uv + dir * (2.0 / 3.0 - 0.5)).rgb);
    vec3 b = a * 0.5 + 0.25 * (texture(colorMap, uv - dir * 0.5).rgb
                             + texture(colorMap, uv + dir * 0.5).rgb);
    float lB = b.g;
    return (lB < lMin || lB > lMax) ? a : b;
}

void main()
{
#ifdef FXAA
    vec3 c = fxaa(fragTexCoord);
#else
    vec3 c = texture(colorMap, fragTexCoord).rgb;
#endif
#ifdef AO
    c *= texture(aoMap, fragTexCoord).r;
#endif
#ifdef BLOOM
    c += texture(bloomMap, fragTexCoord).rgb * bloomStrength;
#endif
    finalColor = vec4(c, 1.0);
}

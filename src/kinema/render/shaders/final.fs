#version 330
// The last full-resolution pass, compiled per effect set (FXAA, AO, BLOOM defines):
// FXAA on the scene colour (after Lottes' FXAA, console variant: blend along the local
// edge direction), times ambient occlusion (blurred at its reduced resolution, upsampled
// bilinearly), plus bloom.
in vec2 fragTexCoord;
uniform sampler2D colorMap;
uniform sampler2D aoMap;
uniform sampler2D bloomMap;
uniform vec2 texel;          // 1 / output size
uniform float bloomStrength;
out vec4 finalColor;

float luma(vec3 c) { return dot(c, vec3(0.299, 0.587, 0.114)); }

vec3 fxaa(vec2 uv)
{
    vec3 rgbM = texture(colorMap, uv).rgb;
    float lNW = luma(texture(colorMap, uv + vec2(-1.0, -1.0) * texel).rgb);
    float lNE = luma(texture(colorMap, uv + vec2( 1.0, -1.0) * texel).rgb);
    float lSW = luma(texture(colorMap, uv + vec2(-1.0,  1.0) * texel).rgb);
    float lSE = luma(texture(colorMap, uv + vec2( 1.0,  1.0) * texel).rgb);
    float lM = luma(rgbM);
    float lMin = min(lM, min(min(lNW, lNE), min(lSW, lSE)));
    float lMax = max(lM, max(max(lNW, lNE), max(lSW, lSE)));
    if (lMax - lMin < max(0.0312, lMax * 0.125)) return rgbM;
    vec2 dir = vec2(-((lNW + lNE) - (lSW + lSE)), (lNW + lSW) - (lNE + lSE));
    float reduce = max((lNW + lNE + lSW + lSE) * 0.25 * 0.125, 1.0 / 128.0);
    float scale = 1.0 / (min(abs(dir.x), abs(dir.y)) + reduce);
    dir = clamp(dir * scale, vec2(-8.0), vec2(8.0)) * texel;
    vec3 a = 0.5 * (texture(colorMap, uv + dir * (1.0 / 3.0 - 0.5)).rgb
                  + texture(colorMap, uv + dir * (2.0 / 3.0 - 0.5)).rgb);
    vec3 b = a * 0.5 + 0.25 * (texture(colorMap, uv - dir * 0.5).rgb
                             + texture(colorMap, uv + dir * 0.5).rgb);
    float lB = luma(b);
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

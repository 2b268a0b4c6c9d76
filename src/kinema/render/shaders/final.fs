#version 330
// The last full-resolution pass: FXAA on the scene colour (after Lottes' FXAA, console
// variant: blend along the local edge direction), times ambient occlusion (already
// blurred at its reduced resolution, upsampled bilinearly), plus bloom.
in vec2 fragTexCoord;
uniform sampler2D colorMap;
uniform sampler2D aoMap;
uniform sampler2D bloomMap;
uniform vec2 texel;          // 1 / output size
uniform float fxaaOn;
uniform float aoOn;
uniform float bloomOn;
uniform float bloomStrength;
out vec4 finalColor;

float luma(vec3 c) { return dot(c, vec3(0.299, 0.587, 0.114)); }

vec3 fxaa(vec2 uv)
{
    // the neighbourhood at whole-pixel offsets: unfiltered fetches (cheaper on software GL)
    ivec2 ip = ivec2(gl_FragCoord.xy);
    ivec2 hi = textureSize(colorMap, 0) - 1;
    vec3 rgbM = texelFetch(colorMap, ip, 0).rgb;
    float lNW = luma(texelFetch(colorMap, clamp(ip + ivec2(-1, -1), ivec2(0), hi), 0).rgb);
    float lNE = luma(texelFetch(colorMap, clamp(ip + ivec2( 1, -1), ivec2(0), hi), 0).rgb);
    float lSW = luma(texelFetch(colorMap, clamp(ip + ivec2(-1,  1), ivec2(0), hi), 0).rgb);
    float lSE = luma(texelFetch(colorMap, clamp(ip + ivec2( 1,  1), ivec2(0), hi), 0).rgb);
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
    vec3 c = fxaaOn > 0.5 ? fxaa(fragTexCoord) : texelFetch(colorMap, ivec2(gl_FragCoord.xy), 0).rgb;
    if (aoOn > 0.5)
    {
        c *= texture(aoMap, fragTexCoord).r;
    }
    if (bloomOn > 0.5) c += texture(bloomMap, fragTexCoord).rgb * bloomStrength;
    finalColor = vec4(c, 1.0);
}

#version 330
// Fast approximate anti-aliasing (after Lottes' FXAA, console variant): find the local
// edge direction from luma differences and blend along it.
in vec2 fragTexCoord;
uniform sampler2D source;
uniform vec2 texel;
out vec4 finalColor;

float luma(vec3 c) { return dot(c, vec3(0.299, 0.587, 0.114)); }

void main()
{
    vec3 rgbM = texture(source, fragTexCoord).rgb;
    float lNW = luma(texture(source, fragTexCoord + vec2(-1.0, -1.0) * texel).rgb);
    float lNE = luma(texture(source, fragTexCoord + vec2( 1.0, -1.0) * texel).rgb);
    float lSW = luma(texture(source, fragTexCoord + vec2(-1.0,  1.0) * texel).rgb);
    float lSE = luma(texture(source, fragTexCoord + vec2( 1.0,  1.0) * texel).rgb);
    float lM = luma(rgbM);
    float lMin = min(lM, min(min(lNW, lNE), min(lSW, lSE)));
    float lMax = max(lM, max(max(lNW, lNE), max(lSW, lSE)));
    if (lMax - lMin < max(0.0312, lMax * 0.125)) { finalColor = vec4(rgbM, 1.0); return; }
    vec2 dir = vec2(-((lNW + lNE) - (lSW + lSE)), (lNW + lSW) - (lNE + lSE));
    float reduce = max((lNW + lNE + lSW + lSE) * 0.25 * 0.125, 1.0 / 128.0);
    float scale = 1.0 / (min(abs(dir.x), abs(dir.y)) + reduce);
    dir = clamp(dir * scale, vec2(-8.0), vec2(8.0)) * texel;
    vec3 a = 0.5 * (texture(source, fragTexCoord + dir * (1.0 / 3.0 - 0.5)).rgb
                  + texture(source, fragTexCoord + dir * (2.0 / 3.0 - 0.5)).rgb);
    vec3 b = a * 0.5 + 0.25 * (texture(source, fragTexCoord - dir * 0.5).rgb
                             + texture(source, fragTexCoord + dir * 0.5).rgb);
    float lB = luma(b);
    finalColor = vec4((lB < lMin || lB > lMax) ? a : b, 1.0);
}

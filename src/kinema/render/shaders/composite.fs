#version 330
// Combine the scene colour with ambient occlusion and bloom.
in vec2 fragTexCoord;
uniform sampler2D colorMap;
uniform sampler2D aoMap;
uniform sampler2D bloomMap;
uniform float aoOn;
uniform float bloomOn;
uniform float bloomStrength;
out vec4 finalColor;
void main()
{
    vec3 c = texture(colorMap, fragTexCoord).rgb;
    if (aoOn > 0.5) c *= texture(aoMap, fragTexCoord).r;
    if (bloomOn > 0.5) c += texture(bloomMap, fragTexCoord).rgb * bloomStrength;
    finalColor = vec4(c, 1.0);
}

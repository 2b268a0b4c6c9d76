#version 330
// Bloom bright pass: keeps what exceeds `threshold` (soft knee), 4-tap downsample.
in vec2 fragTexCoord;
uniform sampler2D source;
uniform vec2 texel;
uniform float threshold;
out vec4 finalColor;
void main()
{
    vec3 c = 0.25 * (texture(source, fragTexCoord + texel * vec2(-0.5, -0.5)).rgb
                   + texture(source, fragTexCoord + texel * vec2( 0.5, -0.5)).rgb
                   + texture(source, fragTexCoord + texel * vec2(-0.5,  0.5)).rgb
                   + texture(source, fragTexCoord + texel * vec2( 0.5,  0.5)).rgb);
    float l = max(c.r, max(c.g, c.b));
    float k = clamp((l - threshold) / max(1.0 - threshold, 1e-3), 0.0, 1.0);
    finalColor = vec4(c * k * k, 1.0);
}

#version 330
// 4x4 box blur from 4 bilinear taps, each halfway between two texels (used on the
// reduced-resolution AO, whose noise repeats every 4x4 pixels).
in vec2 fragTexCoord;
uniform sampler2D source;
uniform vec2 texel;
out vec4 finalColor;
void main()
{
    finalColor = 0.25 * (texture(source, fragTexCoord + texel * vec2(-1.5, -1.5))
                       + texture(source, fragTexCoord + texel * vec2( 0.5, -1.5))
                       + texture(source, fragTexCoord + texel * vec2(-1.5,  0.5))
                       + texture(source, fragTexCoord + texel * vec2( 0.5,  0.5)));
}

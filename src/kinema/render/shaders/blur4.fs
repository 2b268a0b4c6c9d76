#version 330
// 4x4 box blur from 4 bilinear taps (used on the reduced-resolution AO).
in vec2 fragTexCoord;
uniform sampler2D source;
uniform vec2 texel;
out vec4 finalColor;
void main()
{
    finalColor = 0.25 * (texture(source, fragTexCoord + texel * vec2(-1.0, -1.0))
                       + texture(source, fragTexCoord + texel * vec2( 1.0, -1.0))
                       + texture(source, fragTexCoord + texel * vec2(-1.0,  1.0))
                       + texture(source, fragTexCoord + texel * vec2( 1.0,  1.0)));
}

#version 330
// Separable 9-tap Gaussian blur along `direction` (in texels of the source).
in vec2 fragTexCoord;
uniform sampler2D source;
uniform vec2 direction;
out vec4 finalColor;
void main()
{
    const float w[5] = float[](0.227027, 0.1945946, 0.1216216, 0.054054, 0.016216);
    vec4 c = texture(source, fragTexCoord) * w[0];
    for (int i = 1; i < 5; i++)
    {
        c += texture(source, fragTexCoord + direction * float(i)) * w[i];
        c += texture(source, fragTexCoord - direction * float(i)) * w[i];
    }
    finalColor = c;
}

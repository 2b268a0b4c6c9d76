#version 330
// Shadow-map pass: depth only.
out vec4 finalColor;
void main() { finalColor = vec4(1.0); }

#version 330
in vec4 fragColor;
out vec4 finalColor;
void main() { finalColor = fragColor; }

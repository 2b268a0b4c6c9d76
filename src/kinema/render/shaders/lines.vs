#version 330
// Screen-space wide lines and points. Every segment is a quad of 6 vertices; each vertex
// knows both end points and which corner it is, and is pushed out by half the pixel width
// across and along the projected segment (square caps; a zero-length segment is a point).
layout(location = 0) in vec3 vertexPosition;   // segment start
layout(location = 4) in vec3 vertexOther;      // segment end
layout(location = 2) in vec3 vertexNormal;     // (side -1|+1, end 0|1, width px)
layout(location = 3) in vec4 vertexColor;

uniform mat4 viewProj;
uniform vec2 viewport;

out vec4 fragColor;

void main()
{
    vec4 a = viewProj * vec4(vertexPosition, 1.0);
    vec4 b = viewProj * vec4(vertexOther, 1.0);
    vec2 half_vp = viewport * 0.5;
    vec2 sa = a.xy / max(a.w, 1e-4) * half_vp;
    vec2 sb = b.xy / max(b.w, 1e-4) * half_vp;
    vec2 d = sb - sa;
    float len = length(d);
    vec2 dir = len > 1e-3 ? d / len : vec2(1.0, 0.0);
    vec2 perp = vec2(-dir.y, dir.x);
    float hw = vertexNormal.z * 0.5;
    vec4 p = vertexNormal.y < 0.5 ? a : b;
    vec2 off = perp * vertexNormal.x * hw + dir * (vertexNormal.y * 2.0 - 1.0) * hw;
    p.xy += off / half_vp * p.w;
    fragColor = vertexColor;
    gl_Position = p;
}

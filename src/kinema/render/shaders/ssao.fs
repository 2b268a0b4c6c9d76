#version 330
// Screen-space ambient occlusion from the depth buffer alone (normals from depth
// derivatives), 12 hemisphere samples rotated per pixel; rendered at reduced resolution.
in vec2 fragTexCoord;
uniform sampler2D depthMap;
uniform mat4 projection;
uniform mat4 invProjection;
uniform vec2 texel;          // 1 / full-resolution size
uniform float radius;
uniform float strength;
out vec4 finalColor;

vec3 viewPos(vec2 uv)
{
    float d = texture(depthMap, uv).r;
    vec4 p = invProjection * vec4(uv * 2.0 - 1.0, d * 2.0 - 1.0, 1.0);
    return p.xyz / p.w;
}

const vec3 KERNEL[12] = vec3[](
    vec3( 0.53, 0.17, 0.30), vec3(-0.44, 0.33, 0.22), vec3( 0.12,-0.52, 0.41),
    vec3(-0.21,-0.18, 0.62), vec3( 0.71, 0.40, 0.35), vec3(-0.62, 0.57, 0.18),
    vec3( 0.35,-0.71, 0.15), vec3(-0.75,-0.33, 0.42), vec3( 0.08, 0.22, 0.91),
    vec3( 0.88,-0.12, 0.45), vec3(-0.25, 0.86, 0.41), vec3(-0.05,-0.93, 0.35));

void main()
{
    float d = texture(depthMap, fragTexCoord).r;
    if (d >= 1.0) { finalColor = vec4(1.0); return; }
    vec3 p = viewPos(fragTexCoord);
    vec3 px = viewPos(fragTexCoord + vec2(texel.x, 0.0)) - p;
    vec3 nx = p - viewPos(fragTexCoord - vec2(texel.x, 0.0));
    vec3 py = viewPos(fragTexCoord + vec2(0.0, texel.y)) - p;
    vec3 ny = p - viewPos(fragTexCoord - vec2(0.0, texel.y));
    vec3 dx = abs(px.z) < abs(nx.z) ? px : nx;
    vec3 dy = abs(py.z) < abs(ny.z) ? py : ny;
    vec3 n = normalize(cross(dx, dy));
    // per-pixel rotation (interleaved gradient noise)
    float a = 6.2831853 * fract(52.9829189 * fract(dot(gl_FragCoord.xy, vec2(0.06711056, 0.00583715))));
    vec3 rnd = vec3(cos(a), sin(a), 0.0);
    vec3 t = normalize(rnd - n * dot(rnd, n));
    vec3 b = cross(n, t);
    mat3 tbn = mat3(t, b, n);
    float occ = 0.0;
    for (int i = 0; i < 12; i++)
    {
        vec3 s = p + tbn * KERNEL[i] * radius;
        vec4 c = projection * vec4(s, 1.0);
        vec2 uv = c.xy / c.w * 0.5 + 0.5;
        float sz = viewPos(uv).z;
        float range = smoothstep(0.0, 1.0, radius / max(abs(p.z - sz), 1e-4));
        occ += (sz >= s.z + 0.02 ? 1.0 : 0.0) * range;
    }
    float ao = 1.0 - strength * occ / 12.0;
    finalColor = vec4(vec3(clamp(ao, 0.0, 1.0)), 1.0);
}

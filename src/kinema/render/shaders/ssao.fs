#version 330
// Screen-space ambient occlusion from the depth buffer alone, rendered at reduced
// resolution. View-space positions come from depth with the projection's diagonal terms
// only (symmetric perspective), the normal from the neighbour on the flatter side in x and
// y (no smearing across silhouettes), and `samples` hemisphere samples (up to 16) are
// rotated per pixel by a 4x4 Bayer pattern of 16 angles, which the following 4x4 box blur
// averages out exactly. Fades out with distance.
in vec2 fragTexCoord;
uniform sampler2D depthMap;
uniform vec4 proj;           // (P00, P11, P22, P23) of the camera projection
uniform float radius;
uniform float strength;
uniform int samples;
uniform vec2 texel;          // 1 / depth-map size
out vec4 finalColor;

float viewZ(vec2 uv)
{
    return -proj.w / (texture(depthMap, uv).r * 2.0 - 1.0 + proj.z);
}

vec3 viewPos(vec2 uv)
{
    float z = viewZ(uv);
    return vec3((uv * 2.0 - 1.0) * -z / proj.xy, z);
}

const vec3 KERNEL[16] = vec3[](
    vec3( 0.53, 0.17, 0.30), vec3(-0.44, 0.33, 0.22), vec3( 0.12,-0.52, 0.41), vec3(-0.21,-0.18, 0.62),
    vec3( 0.71, 0.40, 0.35), vec3(-0.62, 0.57, 0.18), vec3( 0.35,-0.71, 0.15), vec3(-0.75,-0.33, 0.42),
    vec3( 0.08, 0.22, 0.91), vec3( 0.88,-0.12, 0.45), vec3(-0.25, 0.86, 0.41), vec3(-0.05,-0.93, 0.35),
    vec3( 0.25, 0.05, 0.15), vec3(-0.12, 0.20, 0.10), vec3( 0.02,-0.28, 0.12), vec3(-0.30,-0.02, 0.25));

void main()
{
    float d = texture(depthMap, fragTexCoord).r;
    if (d >= 1.0) { finalColor = vec4(1.0); return; }
    float z = -proj.w / (d * 2.0 - 1.0 + proj.z);
    float fade = 1.0 - smoothstep(10.0, 20.0, -z);   // far away: sub-pixel radius, skip
    if (fade <= 0.0) { finalColor = vec4(1.0); return; }
    vec3 p = vec3((fragTexCoord * 2.0 - 1.0) * -z / proj.xy, z);
    vec3 px = viewPos(fragTexCoord + vec2(texel.x, 0.0)) - p;
    vec3 nx = p - viewPos(fragTexCoord - vec2(texel.x, 0.0));
    vec3 py = viewPos(fragTexCoord + vec2(0.0, texel.y)) - p;
    vec3 ny = p - viewPos(fragTexCoord - vec2(0.0, texel.y));
    vec3 n = normalize(cross(abs(px.z) < abs(nx.z) ? px : nx, abs(py.z) < abs(ny.z) ? py : ny));
    ivec2 q = ivec2(gl_FragCoord.xy) & 3;
    const float BAYER[16] = float[](0.0, 8.0, 2.0, 10.0, 12.0, 4.0, 14.0, 6.0,
                                    3.0, 11.0, 1.0, 9.0, 15.0, 7.0, 13.0, 5.0);
    float a = 6.2831853 * (BAYER[q.y * 4 + q.x] + 0.5) / 16.0;
    vec3 rnd = vec3(cos(a), sin(a), 0.0);
    vec3 t = normalize(rnd - n * dot(rnd, n));
    mat3 tbn = mat3(t, cross(n, t), n);
    float occ = 0.0;
    for (int i = 0; i < samples; i++)
    {
        vec3 s = p + tbn * KERNEL[i] * radius;
        vec2 uv = s.xy * proj.xy / -s.z * 0.5 + 0.5;
        float sz = viewZ(uv);
        float range = smoothstep(0.0, 1.0, radius / max(abs(p.z - sz), 1e-4));
        occ += (sz >= s.z + 0.02 ? 1.0 : 0.0) * range;
    }
    finalColor = vec4(vec3(clamp(1.0 - fade * strength * occ / float(samples), 0.0, 1.0)), 1.0);
}

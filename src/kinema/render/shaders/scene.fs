#version 330
// Forward lighting: sun (directional, shadow-mapped with filtered PCF) + sky/ground ambient,
// base colour x texture x vertex colour; the floor is a procedural anti-aliased checker
// that fades into the sky colour with distance. Output is gamma-encoded (sRGB-ish).
in vec3 fragWorld;
in vec3 fragNormal;
in vec2 fragTexCoord;
in vec4 fragColor;

uniform vec4 baseColor;
uniform float useVertexColor;
uniform float useTexture;
uniform sampler2D albedoMap;
uniform float checker;        // > 0: floor checker tile size (m)
uniform vec3 checkerA;
uniform vec3 checkerB;
uniform float unlit;

uniform vec3 sunDir;          // unit vector towards the sun
uniform vec3 sunColor;
uniform vec3 skyColor;
uniform vec3 groundColor;
uniform vec3 cameraPos;
uniform float fogDistance;

uniform float shadowsOn;
uniform sampler2DShadow shadowMap;   // hardware depth compare, bilinear PCF
uniform mat4 lightViewProj;
uniform float shadowTexel;
uniform float shadowBias;
uniform float shadowSoft;

out vec4 finalColor;

// gamma 2 instead of 2.2: squares and square roots are far cheaper than pow() on
// software GL, and tiny character triangles shade many fragments each
vec3 toLinear(vec3 c) { return c * c; }

float sunVisibility(vec3 world, vec3 n)
{
    if (shadowsOn < 0.5) return 1.0;
    vec4 lp = lightViewProj * vec4(world + n * 0.02, 1.0);
    vec3 c = lp.xyz / lp.w * 0.5 + 0.5;
    if (c.x <= 0.0 || c.x >= 1.0 || c.y <= 0.0 || c.y >= 1.0 || c.z >= 1.0) return 1.0;
    float z = c.z - shadowBias;
    if (shadowSoft < 0.5)   // one bilinear-filtered compare: 2x2-texel PCF
        return texture(shadowMap, vec3(c.xy, z));
    // 4 bilinear-filtered compares: a smooth 3x3-texel footprint
    return 0.25 * (texture(shadowMap, vec3(c.xy + vec2(-0.5, -0.5) * shadowTexel, z))
                 + texture(shadowMap, vec3(c.xy + vec2( 0.5, -0.5) * shadowTexel, z))
                 + texture(shadowMap, vec3(c.xy + vec2(-0.5,  0.5) * shadowTexel, z))
                 + texture(shadowMap, vec3(c.xy + vec2( 0.5,  0.5) * shadowTexel, z)));
}

void main()
{
    vec4 albedo = baseColor;
    if (useVertexColor > 0.5) albedo *= fragColor;
    if (useTexture > 0.5) albedo *= texture(albedoMap, fragTexCoord);
    if (checker > 0.0)
    {
        vec2 q = fragWorld.xz / checker;
        vec2 w = fwidth(q) + 1e-4;
        // box-filtered checker: 0.5 on average far away, crisp near the camera
        vec2 i = 2.0 * (abs(fract((q - 0.5 * w) * 0.5) - 0.5) - abs(fract((q + 0.5 * w) * 0.5) - 0.5)) / w;
        float s = 0.5 - 0.5 * i.x * i.y;
        albedo.rgb = mix(checkerA, checkerB, s);
    }
    if (unlit > 0.5)
    {
        finalColor = albedo;
        return;
    }
    vec3 n = normalize(fragNormal);
    vec3 v = normalize(cameraPos - fragWorld);
    if (dot(n, v) < 0.0) n = -n;              // double-sided, whatever the winding
    vec3 base = toLinear(albedo.rgb);
    float ndl = max(dot(n, sunDir), 0.0);
    float vis = sunVisibility(fragWorld, n);
    vec3 h = normalize(sunDir + v);
    float s2 = max(dot(n, h), 0.0);
    s2 *= s2; s2 *= s2; s2 *= s2; s2 *= s2; s2 *= s2;   // ^32
    float spec = s2 * 0.15;
    vec3 ambient = mix(toLinear(groundColor), toLinear(skyColor), n.y * 0.5 + 0.5) * 0.55;
    vec3 c = base * (ambient + sunColor * ndl * vis) + sunColor * spec * vis * ndl;
    c = c / (1.0 + c * 0.15);                 // gentle tone curve
    c = sqrt(c);
    if (fogDistance > 0.0)
    {
        float f = clamp(length(fragWorld - cameraPos) / fogDistance, 0.0, 1.0);
        c = mix(c, skyColor, f * f);
    }
    finalColor = vec4(c, albedo.a);
}

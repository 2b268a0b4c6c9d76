#version 330
// Forward lighting: sun (directional; shadow-mapped when SHADOWS is defined, with 4 filtered
// compares when SOFT_SHADOWS) + sky/ground ambient, base colour x texture (TEXTURE) x
// vertex colour (VERTEX_COLOR); CHECKER makes the procedural anti-aliased floor. Every
// option is a compile-time define: software GL runs both sides of uniform branches.
// The floor fades into the sky with distance. Output is gamma-encoded (gamma 2: squares and square roots instead of pow()).
in vec3 fragWorld;
in vec3 fragNormal;
in vec2 fragTexCoord;
in vec4 fragColor;

uniform vec4 baseColor;
uniform sampler2D albedoMap;
uniform float checker;        // floor tile size (m)
uniform vec3 checkerA;
uniform vec3 checkerB;

uniform vec3 sunDir;          // unit vector towards the sun
uniform vec3 sunColor;
uniform vec3 skyColor;
uniform vec3 groundColor;
uniform vec3 cameraPos;
uniform float fogDistance;

#ifdef SHADOWS
uniform sampler2DShadow shadowMap;   // hardware depth compare, bilinear PCF
uniform mat4 lightViewProj;
uniform float shadowTexel;
uniform float shadowBias;

float sunVisibility(vec3 world, vec3 n)
{
    vec4 lp = lightViewProj * vec4(world + n * 0.02, 1.0);
    vec3 c = lp.xyz * 0.5 + 0.5;   // orthographic light: w = 1
    if (c.x <= 0.0 || c.x >= 1.0 || c.y <= 0.0 || c.y >= 1.0 || c.z >= 1.0) return 1.0;
    float z = c.z - shadowBias;
#ifdef SOFT_SHADOWS
    // 4 bilinear-filtered compares: a smooth 3x3-texel footprint
    return 0.25 * (texture(shadowMap, vec3(c.xy + vec2(-0.5, -0.5) * shadowTexel, z))
                 + texture(shadowMap, vec3(c.xy + vec2( 0.5, -0.5) * shadowTexel, z))
                 + texture(shadowMap, vec3(c.xy + vec2(-0.5,  0.5) * shadowTexel, z))
                 + texture(shadowMap, vec3(c.xy + vec2( 0.5,  0.5) * shadowTexel, z)));
#else
    return texture(shadowMap, vec3(c.xy, z));   // one filtered compare: 2x2-texel PCF
#endif
}
#endif

out vec4 finalColor;

void main()
{
    vec4 albedo = baseColor;
#ifdef VERTEX_COLOR
    albedo *= fragColor;
#endif
#ifdef TEXTURE
    albedo *= texture(albedoMap, fragTexCoord);
#endif
#ifdef CHECKER
    vec2 q = fragWorld.xz / checker;
    vec2 w = fwidth(q) + 1e-4;
    // box-filtered checker: 0.5 on average far away, crisp near the camera
    vec2 i = 2.0 * (abs(fract((q - 0.5 * w) * 0.5) - 0.5) - abs(fract((q + 0.5 * w) * 0.5) - 0.5)) / w;
    albedo.rgb = mix(checkerA, checkerB, 0.5 - 0.5 * i.x * i.y);
#endif
    vec3 n = normalize(fragNormal);
    if (!gl_FrontFacing) n = -n;              // back faces of double-sided meshes
    vec3 v = normalize(cameraPos - fragWorld);
    vec3 base = albedo.rgb * albedo.rgb;
    float ndl = max(dot(n, sunDir), 0.0);
#ifdef SHADOWS
    float vis = ndl > 0.0 ? sunVisibility(fragWorld, n) : 0.0;
#else
    float vis = 1.0;
#endif
    vec3 h = normalize(sunDir + v);
    float s2 = max(dot(n, h), 0.0);
    s2 *= s2; s2 *= s2; s2 *= s2; s2 *= s2; s2 *= s2;   // ^32
    vec3 ambient = mix(groundColor * groundColor, skyColor * skyColor, n.y * 0.5 + 0.5) * 0.55;
    vec3 c = base * (ambient + sunColor * ndl * vis) + sunColor * (s2 * 0.15) * vis * ndl;
    c = sqrt(c / (1.0 + c * 0.15));            // gentle tone curve, then gamma
#ifdef CHECKER
    // the floor fades into the sky towards the horizon (characters never do)
    float f = clamp(length(fragWorld - cameraPos) / fogDistance, 0.0, 1.0);
    c = mix(c, skyColor, f * f);
#endif
    finalColor = vec4(c, albedo.a);
}

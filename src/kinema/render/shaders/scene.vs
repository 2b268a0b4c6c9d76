#version 330
// Scene geometry: world-space meshes (debug solids, procedural bodies, floor) and
// GPU-skinned characters (#define SKINNED): linear-blend skinning with 4 weights.
layout(location = 0) in vec3 vertexPosition;
layout(location = 1) in vec2 vertexTexCoord;
layout(location = 2) in vec3 vertexNormal;
layout(location = 3) in vec4 vertexColor;
#ifdef SKINNED
layout(location = 7) in vec4 vertexBoneIndices;
layout(location = 8) in vec4 vertexBoneWeights;
uniform mat4 boneMatrices[MAX_BONES];
#endif

uniform mat4 viewProj;
uniform mat4 model;

out vec3 fragWorld;
out vec3 fragNormal;
out vec2 fragTexCoord;
out vec4 fragColor;

void main()
{
    vec4 p = vec4(vertexPosition, 1.0);
    vec3 n = vertexNormal;
#ifdef SKINNED
    mat4 skin = boneMatrices[int(vertexBoneIndices.x)] * vertexBoneWeights.x
              + boneMatrices[int(vertexBoneIndices.y)] * vertexBoneWeights.y
              + boneMatrices[int(vertexBoneIndices.z)] * vertexBoneWeights.z
              + boneMatrices[int(vertexBoneIndices.w)] * vertexBoneWeights.w;
    p = skin * p;
    n = mat3(skin) * n;
#endif
    vec4 world = model * p;
    fragWorld = world.xyz;
    fragNormal = mat3(model) * n;
    fragTexCoord = vertexTexCoord;
    fragColor = vertexColor;
    gl_Position = viewProj * world;
}

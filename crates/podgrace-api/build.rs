//! Compiles the upstream protobuf definitions of the served kinds (`proto/k8s.io/...`, copied
//! from kubernetes `staging/src/k8s.io/{api,apimachinery}/.../generated.proto`) into one
//! encoded `FileDescriptorSet` with protox (no protoc needed), for the protobuf request bodies
//! that kubectl's typed commands send (`crate::protobuf`).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "k8s.io/api/core/v1/generated.proto",
        "k8s.io/api/apps/v1/generated.proto",
        "k8s.io/api/autoscaling/v1/generated.proto",
        "k8s.io/api/coordination/v1/generated.proto",
        "k8s.io/api/discovery/v1/generated.proto",
        "k8s.io/api/events/v1/generated.proto",
        "k8s.io/api/policy/v1/generated.proto",
        "k8s.io/apimachinery/pkg/runtime/generated.proto",
    ];
    println!("cargo:rerun-if-changed=proto");
    let mut compiler = protox::Compiler::new(["proto"])?;
    compiler.include_imports(true);
    compiler.open_files(files)?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("k8s-descriptors.bin");
    std::fs::write(out, compiler.encode_file_descriptor_set())?;
    Ok(())
}

//! Generates the CRI v1 messages and gRPC clients from `proto/runtime/v1/api.proto`
//! (kubernetes `staging/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto`), compiled by protox
//! so that no protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/runtime/v1/api.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .compile_fds(fds)?;
    Ok(())
}

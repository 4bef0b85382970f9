//! Exit codes by error kind: bad usage or input exits 2, a failure of this machine (a port in
//! use, a container runtime out of reach) exits 3, each with the cause on stderr.

mod common;

use common::*;

#[test]
fn serve_on_a_port_in_use_exits_3_and_names_the_address() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let tmpdir = tempdir("exit-serve");
    let kubeconfig = tmpdir.path().join("kubeconfig");
    let out = podgrace(&[
        "serve",
        "--bind",
        &addr,
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("listening on {addr}")), "{err}");
    // The cause is kept under the context, as the kernel said it.
    assert!(err.contains("Address already in use"), "{err}");
}

#[test]
fn a_container_runtime_out_of_reach_exits_3_but_a_missing_file_exits_2() {
    let file = tmp_file(
        "exit-runtime",
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, \"1\"]\n",
    );
    let out = podgrace(&[
        "run",
        file.to_str().unwrap(),
        "--runtime",
        "containerd:/nonexistent/containerd.sock",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot reach the container runtime at /nonexistent/containerd.sock"),
        "{}",
        stderr(&out)
    );
    let missing = podgrace(&["run", "/nonexistent/pod.yaml"]);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
}

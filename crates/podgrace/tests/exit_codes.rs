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
    // podgrace's words, then the kernel's, each once, on lines of their own.
    assert_eq!(
        stderr(&out),
        format!("error: listening on {addr}\nerror: Address already in use (os error 98)\n")
    );
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
    // podgrace's words with the hint, then the machine's, each cause once.
    assert_eq!(
        stderr(&out),
        "error: cannot reach the container runtime at /nonexistent/containerd.sock: --runtime containerd: is containerd running, and is its socket readable? (sudo; or start a private one with .ci/containerd.sh start)\nerror: No such file or directory (os error 2)\n"
    );
    // The same for explain's and lint's --image-source, with its own flag.
    for verb in ["explain", "lint"] {
        let out = podgrace(&[
            verb,
            file.to_str().unwrap(),
            "--image-source",
            "containerd:/nonexistent/containerd.sock",
        ]);
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        assert_eq!(
            stderr(&out),
            "error: cannot reach the container runtime at /nonexistent/containerd.sock: --image-source containerd: is containerd running, and is its socket readable? (sudo; or start a private one with .ci/containerd.sh start)\nerror: No such file or directory (os error 2)\n"
        );
    }
    // A path that is there but is no socket is said so (connect(2) would say "Connection
    // refused" for a regular file and "Not a directory" below one).
    let dir = file.parent().unwrap();
    for (path, what) in [(&*file, "a regular file"), (dir, "a directory")] {
        let runtime = format!("containerd:{}", path.display());
        let out = podgrace(&["run", file.to_str().unwrap(), "--runtime", &runtime]);
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
        assert_eq!(
            stderr(&out),
            format!("error: cannot reach the container runtime at {p}: --runtime containerd: is containerd running, and is its socket readable? (sudo; or start a private one with .ci/containerd.sh start)\nerror: {p} is {what}, not a Unix socket\n", p = path.display())
        );
    }
    let missing = podgrace(&["run", "/nonexistent/pod.yaml"]);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
}

/// A socket that accepts and never answers: after the 10 s CRI `Version` deadline, exit 3 with
/// podgrace's words and one line of the machine's (not the gRPC status's debug output).
#[test]
fn a_container_runtime_that_never_answers_is_named_once() {
    let dir = tempdir("exit-mute");
    let sock = dir.path().join("mute.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let file = tmp_file(
        "exit-mute",
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    image: busybox\n    command: [sleep, \"1\"]\n",
    );
    let runtime = format!("containerd:{}", sock.display());
    let out = podgrace(&["run", file.to_str().unwrap(), "--runtime", &runtime]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!("error: cannot reach the container runtime at {}: --runtime containerd: is containerd running, and is its socket readable? (sudo; or start a private one with .ci/containerd.sh start)\nerror: no answer to CRI Version within 10 s\n", sock.display())
    );
}

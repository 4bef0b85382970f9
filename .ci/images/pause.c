/* The pod sandbox's process for podgrace's test containerd (containerd's sandbox_image):
 * holds the pod's namespaces, reaps what is re-parented to it and exits on SIGINT or SIGTERM,
 * as the kubelet's pause container does. Built static so the image needs no other file. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { _exit(128 + sig); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction q = {.sa_handler = quit};
    struct sigaction r = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigaction(SIGINT, &q, NULL);
    sigaction(SIGTERM, &q, NULL);
    sigaction(SIGCHLD, &r, NULL);
    for (;;) {
        pause();
    }
}

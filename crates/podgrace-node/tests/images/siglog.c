/* The signal logger of podgrace's containerd test images (built static by the tests).
 *
 *   siglog [EXIT_SIGNAL [DELAY_MS [CODE]]]
 *
 * Prints "siglog started pid=N", then "siglog got SIGNAME" for every signal it receives
 * (each line flushed). On EXIT_SIGNAL (a number; default 15) it waits DELAY_MS (default 0)
 * and exits with CODE (default 0); EXIT_SIGNAL 0 ignores every signal it can. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t last;

static void on_signal(int sig) { last = sig; }

int main(int argc, char **argv) {
    int exit_on = argc > 1 ? atoi(argv[1]) : 15;
    long delay_ms = argc > 2 ? atol(argv[2]) : 0;
    int code = argc > 3 ? atoi(argv[3]) : 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    for (int s = 1; s < 32; s++) {
        if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD) sigaction(s, &sa, NULL);
    }
    printf("siglog started pid=%d\n", (int)getpid());
    fflush(stdout);
    for (;;) {
        pause();
        int sig = last;
        if (!sig) continue;
        last = 0;
        printf("siglog got SIG%s\n", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
        fflush(stdout);
        if (exit_on != 0 && sig == exit_on) {
            struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
            printf("siglog exiting %d\n", code);
            fflush(stdout);
            return code;
        }
    }
}

/* The pod sandbox's process (what registry.k8s.io/pause runs), built here by tools/get_images.py
 * as a static binary: it holds the pod's namespaces open, reaps the zombies of a shared PID
 * namespace, and exits on SIGINT or SIGTERM. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signo) { _exit(signo == SIGINT || signo == SIGTERM ? 0 : 1); }

static void reap(int signo) {
    (void)signo;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_stop = {.sa_handler = stop};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    if (sigaction(SIGINT, &on_stop, NULL) < 0 || sigaction(SIGTERM, &on_stop, NULL) < 0 ||
        sigaction(SIGCHLD, &on_child, NULL) < 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}

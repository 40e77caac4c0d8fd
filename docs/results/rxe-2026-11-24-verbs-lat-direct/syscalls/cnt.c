#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <stdlib.h>
static long n_ep, n_ep0;
int epoll_wait(int fd, struct epoll_event *ev, int max, int to)
{
    static int (*real)(int, struct epoll_event *, int, int);
    if (!real) real = dlsym(RTLD_NEXT, "epoll_wait");
    n_ep++; if (to == 0) n_ep0++;
    return real(fd, ev, max, to);
}
__attribute__((destructor)) static void done(void)
{
    char p[64]; snprintf(p, sizeof p, "%s/epcount.%d", getenv("EPC_DIR") ? getenv("EPC_DIR") : "/tmp", getpid());
    FILE *f = fopen(p, "w"); if (f) { fprintf(f, "epoll_wait %ld (timeout 0: %ld)\n", n_ep, n_ep0); fclose(f); }
}

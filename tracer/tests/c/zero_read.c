/* usage: zero_read N ITERS: ITERS reads of 4 KiB from /dev/zero (N is ignored): a loop of
 * short syscalls whose time is mostly kernel time. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s N ITERS\n", argv[0]); return 2; }
    long iters = atol(argv[2]);
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0) { perror("open"); return 1; }
    static char buf[4096];
    for (long i = 0; i < iters; i++)
        if (read(fd, buf, sizeof buf) != sizeof buf) { perror("read"); return 1; }
    return 0;
}

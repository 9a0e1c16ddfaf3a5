/* usage: flat_syscalls N ITERS: ITERS getppid() calls and 64-byte /dev/zero reads, plus N
 * million iterations of user-space arithmetic: N changes the run, not the kernel's work. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s N ITERS\n", argv[0]); return 2; }
    long n = atol(argv[1]), iters = atol(argv[2]);
    volatile unsigned long acc = 0;
    for (long i = 0; i < n * 100000; i++) acc += (unsigned long)i * 2654435761u;
    int fd = open("/dev/zero", O_RDONLY);
    if (fd < 0) { perror("open"); return 1; }
    char buf[64];
    long sum = 0;
    for (long i = 0; i < iters; i++) {
        sum += getppid();
        if (read(fd, buf, sizeof buf) != sizeof buf) { perror("read"); return 1; }
    }
    printf("%ld %lu\n", sum, (unsigned long)acc);
    return 0;
}

/* usage: fork_vmas N ITERS: map N one-page VMAs that cannot merge (alternating protections,
 * touched so fork copies their page tables), then ITERS x (fork; child _exit; waitpid). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s N ITERS\n", argv[0]); return 2; }
    long n = atol(argv[1]), iters = atol(argv[2]);
    long page = sysconf(_SC_PAGESIZE);
    char *base = mmap(NULL, (n + 1) * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) { perror("mmap"); return 1; }
    for (long i = 0; i < n; i++) {
        char *p = base + i * page;
        int prot = (i % 2) ? PROT_READ : PROT_READ | PROT_WRITE;
        if (mprotect(p, page, PROT_READ | PROT_WRITE)) { perror("mprotect"); return 1; }
        p[0] = 1;
        if (mprotect(p, page, prot)) { perror("mprotect"); return 1; }
    }
    for (long i = 0; i < iters; i++) {
        pid_t c = fork();
        if (c < 0) { perror("fork"); return 1; }
        if (c == 0) _exit(0);
        if (waitpid(c, NULL, 0) != c) { perror("waitpid"); return 1; }
    }
    return 0;
}

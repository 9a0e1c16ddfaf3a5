/* usage: sysvipc_read N READS: create N SysV shm segments, read /proc/sysvipc/shm fully
 * READS times, remove the segments. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s N READS\n", argv[0]); return 2; }
    long n = atol(argv[1]), reads = atol(argv[2]);
    int *ids = calloc(n > 0 ? n : 1, sizeof(int));
    int rc = 0;
    long made = 0;
    for (; made < n; made++) {
        ids[made] = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
        if (ids[made] < 0) { perror("shmget"); rc = 1; break; }
    }
    static char buf[65536];
    for (long r = 0; r < reads && rc == 0; r++) {
        int fd = open("/proc/sysvipc/shm", O_RDONLY);
        if (fd < 0) { perror("open"); rc = 1; break; }
        while (read(fd, buf, sizeof buf) > 0) {}
        close(fd);
    }
    for (long i = 0; i < made; i++) shmctl(ids[i], IPC_RMID, NULL);
    return rc;
}

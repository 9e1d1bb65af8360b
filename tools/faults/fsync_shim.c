/* LD_PRELOAD shim for the fault suite: fsync and fdatasync fail with EIO once the
 * file named by $TENURE_FAULTS_FSYNC_TRIGGER exists.
 *
 * A failed fsync on Linux may drop the dirty pages it could not write, so the
 * shim also cuts a regular file back to the size it had at its last successful
 * sync: what was never made durable is gone, and a server that acknowledged it
 * anyway would be caught by the durability check after its restart.
 * Compiled by tools/faults/disk.py at test time (gcc -shared -fPIC). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FD 65536

struct synced { dev_t dev; ino_t ino; off_t size; int known; };
static struct synced last[MAX_FD];

static int triggered(void) {
    const char *trigger = getenv("TENURE_FAULTS_FSYNC_TRIGGER");
    return trigger != NULL && access(trigger, F_OK) == 0;
}

static void remember(int fd) {
    struct stat st;
    if (fd >= 0 && fd < MAX_FD && fstat(fd, &st) == 0) {
        last[fd].dev = st.st_dev;
        last[fd].ino = st.st_ino;
        last[fd].size = st.st_size;
        last[fd].known = 1;
    }
}

static int fail(int fd) {
    struct stat st;
    if (fd >= 0 && fd < MAX_FD && last[fd].known && fstat(fd, &st) == 0
        && S_ISREG(st.st_mode) && st.st_dev == last[fd].dev && st.st_ino == last[fd].ino
        && st.st_size > last[fd].size) {
        if (ftruncate(fd, last[fd].size) != 0) {
            /* nothing more to do: the sync fails either way */
        }
    }
    errno = EIO;
    return -1;
}

int fsync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (triggered()) return fail(fd);
    int result = real(fd);
    if (result == 0) remember(fd);
    return result;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (triggered()) return fail(fd);
    int result = real(fd);
    if (result == 0) remember(fd);
    return result;
}

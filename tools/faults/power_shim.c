/* LD_PRELOAD shim for the fault suite's power scenario: a data directory whose
 * writes reach the disk only when they are made durable, so that kill -9 of the
 * server is a power cut for its data.
 *
 * For every file under $TENURE_POWER_DIR (the server's data directory):
 *   - write, pwrite, pwrite64, writev, pwritev, pwritev64 are kept in this
 *     process's memory (per file: device and inode), in order; the call returns
 *     as if written. fsync and fdatasync of the file (any of its descriptors)
 *     first apply them to the real file, in order, then sync it for real.
 *     Dying with the process (SIGKILL) they are lost: what a power cut does to
 *     the page cache. (sync_file_range, msync and mmap: the server uses none.)
 *   - read, pread, pread64 see them: the real bytes, with the pending writes laid
 *     over them in order (a read past the real end reads what is pending there).
 *     fstat is not overlaid: the server asks only for sizes of files it has just
 *     opened, which have nothing pending.
 *   - ftruncate cuts the pending writes too, and is applied at once.
 *   - a file created (open with O_CREAT of a missing file) or renamed onto is
 *     durable only once its directory is fsynced: until then each creation or
 *     rename is appended to $TENURE_POWER_JOURNAL (outside the directory); after
 *     the cut, the harness (tools/faults/power.py: undo_unsynced) undoes every
 *     line still there, newest first: a created file vanishes, a rename goes back
 *     (the file it replaced, kept as a hard link NAME.power-prev, comes back).
 *     The worst case of the possible outcomes, always. Unlinks are applied at once
 *     (treated as durable at once: the server unlinks only what a durable
 *     snapshot made useless).
 * Optional, for torn tails: $TENURE_POWER_TORN=P (0..1). On each write to a
 * file, with probability P, some of the 512-byte sectors its pending writes
 * touch are written to the real file, each sector whole with its pending
 * content (not synced, and still pending): half the time a random half of them
 * (dirty blocks written back before the cut, in no particular order), half the
 * time a random suffix (a batch's later blocks on disk without its start, as a
 * reordering disk leaves them when the power goes during the write). Sectors
 * are atomic here (disks promise that much); a sector half written is not
 * modelled.
 * A cut then leaves the tail of the log partly written: later pages of a batch
 * on disk without its start, records cut in half.
 * Optional, for torn tails under --fsync always (where little is ever pending):
 * $TENURE_POWER_CUT_IN_SYNC=P (0..1): an fsync or fdatasync of a file with
 * pending writes, with probability P, first writes some of its pages as above
 * (a random half, or a random suffix) and then SIGKILLs the process: the power
 * going out while the sync writes, the worst moment for the log's tail.
 * Optional, for --fsync off: $TENURE_POWER_WRITEBACK=SECONDS: pending writes
 * older than that are applied (not synced) at the next write to any file, as
 * the kernel's flusher writes back dirty pages after dirty_expire_centisecs.
 *
 * One mutex guards it all (the server writes from a writer thread and the event
 * loop). Compiled by tools/faults/power.py (gcc -shared -fPIC), as
 * tools/faults/fsync_shim.c is by tools/faults/disk.py. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 4096
#define MAX_FILES 256
#define MAX_BACKUPS 64
/* The unit a disk writes atomically: a power cut leaves each sector old or new. */
#define SECTOR 512

struct extent { off_t offset; size_t length; double at; char *data; };
struct file { dev_t dev; ino_t ino; int used; struct extent *extents; size_t count, capacity; };
/* fd state: 0 unknown, 1 a file under the directory, 2 the directory, 3 elsewhere */
static unsigned char kind[MAX_FD];
static struct file files[MAX_FILES];
static char backups[MAX_BACKUPS][PATH_MAX + 16];
static int backup_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int seed = 12345;

static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);
static int (*real_ftruncate)(int, off_t);
static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);

static void init(void) {
    if (real_write != NULL) return;
    real_pwrite = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    real_read = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    real_pread = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread64");
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    real_ftruncate = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate64");
    real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open64");
    real_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat64");
    real_rename = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    real_renameat = (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
    const char *torn = getenv("TENURE_POWER_TORN");
    if (torn != NULL) seed = (unsigned int)getpid();
    real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *directory(void) {
    const char *dir = getenv("TENURE_POWER_DIR");
    return dir != NULL && dir[0] != '\0' ? dir : NULL;
}

/* Whether absolute path `path` is the directory (2), under it (1) or not (3). */
static int classify_path(const char *path) {
    const char *dir = directory();
    if (dir == NULL) return 3;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (strncmp(path, dir, n) != 0) return 3;
    if (path[n] == '\0') return 2;
    return path[n] == '/' ? 1 : 3;
}

static int classify(int fd) {
    if (fd < 0 || fd >= MAX_FD) return 3;
    if (kind[fd] == 0) {
        char link[64], path[PATH_MAX];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n <= 0) return 3;
        path[n] = '\0';
        kind[fd] = (unsigned char)classify_path(path);
    }
    return kind[fd];
}

static struct file *file_of(int fd, int create) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
    struct file *free_slot = NULL;
    for (int i = 0; i < MAX_FILES; i++) {
        if (files[i].used && files[i].dev == st.st_dev && files[i].ino == st.st_ino)
            return &files[i];
        if (!files[i].used && free_slot == NULL) free_slot = &files[i];
    }
    if (!create || free_slot == NULL) return NULL;
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->used = 1;
    free_slot->dev = st.st_dev;
    free_slot->ino = st.st_ino;
    return free_slot;
}

static int add(struct file *f, off_t offset, const char *data, size_t length) {
    if (f->count == f->capacity) {
        size_t capacity = f->capacity ? f->capacity * 2 : 16;
        struct extent *grown = realloc(f->extents, capacity * sizeof *grown);
        if (grown == NULL) return -1;
        f->extents = grown;
        f->capacity = capacity;
    }
    char *copy = malloc(length ? length : 1);
    if (copy == NULL) return -1;
    memcpy(copy, data, length);
    f->extents[f->count++] = (struct extent){offset, length, now(), copy};
    return 0;
}

static void write_all(int fd, const char *data, size_t length, off_t offset) {
    while (length > 0) {
        ssize_t n = real_pwrite(fd, data, length, offset);
        if (n <= 0) return;
        data += n;
        length -= (size_t)n;
        offset += n;
    }
}

/* Apply extents [0, upto) of `f` through `fd` and drop them. */
static void apply(struct file *f, int fd, size_t upto) {
    for (size_t i = 0; i < upto; i++) {
        write_all(fd, f->extents[i].data, f->extents[i].length, f->extents[i].offset);
        free(f->extents[i].data);
    }
    memmove(f->extents, f->extents + upto, (f->count - upto) * sizeof *f->extents);
    f->count -= upto;
}

static ssize_t overlay(int fd, char *out, size_t length, off_t offset);

/* Torn tails: write some of the 512-byte sectors the pending writes touch, each
 * whole and as it reads now (the cache holds blocks, not writes). Half the time a
 * random half of them; the other half a random suffix: the later sectors of what
 * is pending without its start, as a disk that reorders a batch's blocks leaves
 * them when the power goes mid-write. */
static void tear(struct file *f, int fd) {
    char page_bytes[SECTOR];
    off_t low = -1, high = -1;
    for (size_t i = 0; i < f->count; i++) {
        struct extent *e = &f->extents[i];
        if (e->length == 0) continue;
        off_t first = e->offset / SECTOR, last = (e->offset + (off_t)e->length - 1) / SECTOR;
        if (low < 0 || first < low) low = first;
        if (last > high) high = last;
    }
    if (low < 0) return;
    int suffix = rand_r(&seed) % 2;
    off_t from = suffix ? low + (off_t)(rand_r(&seed) % (unsigned int)(high - low + 1)) : low;
    for (off_t page = from; page <= high; page++) {
        int touched = 0;
        for (size_t i = 0; i < f->count && !touched; i++) {
            struct extent *e = &f->extents[i];
            touched = e->length > 0 && e->offset / SECTOR <= page
                      && (e->offset + (off_t)e->length - 1) / SECTOR >= page;
        }
        if (!touched || (!suffix && rand_r(&seed) % 2)) continue;
        ssize_t n = overlay(fd, page_bytes, SECTOR, page * SECTOR);
        if (n > 0) write_all(fd, page_bytes, (size_t)n, page * SECTOR);
    }
}

/* Writeback (--fsync off): apply the leading extents older than the limit. */
static void writeback(struct file *f, int fd) {
    const char *limit = getenv("TENURE_POWER_WRITEBACK");
    if (limit == NULL) return;
    double oldest = now() - atof(limit);
    size_t n = 0;
    while (n < f->count && f->extents[n].at <= oldest) n++;
    if (n) apply(f, fd, n);
}

static ssize_t buffer(int fd, const char *data, size_t length, off_t offset, int advance) {
    struct file *f = file_of(fd, 1);
    if (f == NULL || add(f, offset, data, length) != 0) {
        errno = ENOMEM;
        return -1;
    }
    if (advance) lseek(fd, offset + (off_t)length, SEEK_SET);
    const char *torn = getenv("TENURE_POWER_TORN");
    if (torn != NULL && (double)rand_r(&seed) / RAND_MAX < atof(torn)) tear(f, fd);
    writeback(f, fd);
    return (ssize_t)length;
}

static off_t position(int fd) {
    if (fcntl(fd, F_GETFL) & O_APPEND) {
        struct stat st;
        off_t end = fstat(fd, &st) == 0 ? st.st_size : 0;
        struct file *f = file_of(fd, 0);
        for (size_t i = 0; f != NULL && i < f->count; i++)
            if (f->extents[i].offset + (off_t)f->extents[i].length > end)
                end = f->extents[i].offset + (off_t)f->extents[i].length;
        return end;
    }
    return lseek(fd, 0, SEEK_CUR);
}

ssize_t pwrite64(int fd, const void *data, size_t length, off_t offset) {
    init();
    if (classify(fd) != 1) return real_pwrite(fd, data, length, offset);
    pthread_mutex_lock(&lock);
    ssize_t n = buffer(fd, data, length, offset, 0);
    pthread_mutex_unlock(&lock);
    return n;
}

ssize_t pwrite(int fd, const void *data, size_t length, off_t offset) {
    return pwrite64(fd, data, length, offset);
}

ssize_t write(int fd, const void *data, size_t length) {
    init();
    if (classify(fd) != 1) return real_write(fd, data, length);
    pthread_mutex_lock(&lock);
    ssize_t n = buffer(fd, data, length, position(fd), 1);
    pthread_mutex_unlock(&lock);
    return n;
}

static ssize_t gather(int fd, const struct iovec *iov, int count, off_t offset, int advance) {
    size_t total = 0;
    for (int i = 0; i < count; i++) total += iov[i].iov_len;
    char *joined = malloc(total ? total : 1);
    if (joined == NULL) {
        errno = ENOMEM;
        return -1;
    }
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        memcpy(joined + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    pthread_mutex_lock(&lock);
    ssize_t n = buffer(fd, joined, total, offset < 0 ? position(fd) : offset, advance);
    pthread_mutex_unlock(&lock);
    free(joined);
    return n;
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
    init();
    if (classify(fd) != 1) {
        ssize_t (*real)(int, const struct iovec *, int) =
            (ssize_t (*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
        return real(fd, iov, count);
    }
    return gather(fd, iov, count, -1, 1);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int count, off_t offset) {
    init();
    if (classify(fd) != 1) {
        ssize_t (*real)(int, const struct iovec *, int, off_t) =
            (ssize_t (*)(int, const struct iovec *, int, off_t))dlsym(RTLD_NEXT, "pwritev64");
        return real(fd, iov, count, offset);
    }
    return gather(fd, iov, count, offset, 0);
}

ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    return pwritev64(fd, iov, count, offset);
}

/* The real bytes at [offset, offset + length) with the pending writes laid over. */
static ssize_t overlay(int fd, char *out, size_t length, off_t offset) {
    struct file *f = file_of(fd, 0);
    if (f == NULL || f->count == 0) return real_pread(fd, out, length, offset);
    struct stat st;
    off_t end = fstat(fd, &st) == 0 ? st.st_size : 0;
    for (size_t i = 0; i < f->count; i++)
        if (f->extents[i].offset + (off_t)f->extents[i].length > end)
            end = f->extents[i].offset + (off_t)f->extents[i].length;
    if (offset >= end) return 0;
    if ((off_t)length > end - offset) length = (size_t)(end - offset);
    memset(out, 0, length);
    ssize_t got = real_pread(fd, out, length, offset);
    if (got < 0 && errno == EBADF) {
        /* A write-only descriptor (the server's log): read through another one. */
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        int reader = real_open(link, O_RDONLY | O_CLOEXEC, 0);
        if (reader < 0) return -1;
        got = real_pread(reader, out, length, offset);
        real_close(reader);
    }
    if (got < 0) return got;
    for (size_t i = 0; i < f->count; i++) {
        struct extent *e = &f->extents[i];
        off_t from = e->offset > offset ? e->offset : offset;
        off_t to = e->offset + (off_t)e->length;
        if (to > offset + (off_t)length) to = offset + (off_t)length;
        if (from < to) memcpy(out + (from - offset), e->data + (from - e->offset), (size_t)(to - from));
    }
    return (ssize_t)length;
}

ssize_t pread64(int fd, void *out, size_t length, off_t offset) {
    init();
    if (classify(fd) != 1) return real_pread(fd, out, length, offset);
    pthread_mutex_lock(&lock);
    ssize_t n = overlay(fd, out, length, offset);
    pthread_mutex_unlock(&lock);
    return n;
}

ssize_t pread(int fd, void *out, size_t length, off_t offset) {
    return pread64(fd, out, length, offset);
}

ssize_t read(int fd, void *out, size_t length) {
    init();
    if (classify(fd) != 1) return real_read(fd, out, length);
    pthread_mutex_lock(&lock);
    off_t at = lseek(fd, 0, SEEK_CUR);
    ssize_t n = overlay(fd, out, length, at);
    if (n > 0) lseek(fd, at + n, SEEK_SET);
    pthread_mutex_unlock(&lock);
    return n;
}

/* A directory fsync makes its creations and renames durable: forget them. */
static void directory_synced(void) {
    const char *journal = getenv("TENURE_POWER_JOURNAL");
    if (journal != NULL) truncate(journal, 0);
    for (int i = 0; i < backup_count; i++) unlink(backups[i]);
    backup_count = 0;
}

static int sync_with(int fd, int (*real)(int)) {
    init();
    int k = classify(fd);
    if (k == 2) {
        int result = real(fd);
        if (result == 0) {
            pthread_mutex_lock(&lock);
            directory_synced();
            pthread_mutex_unlock(&lock);
        }
        return result;
    }
    if (k == 1) {
        pthread_mutex_lock(&lock);
        struct file *f = file_of(fd, 0);
        const char *cut = getenv("TENURE_POWER_CUT_IN_SYNC");
        if (f != NULL && f->count > 0 && cut != NULL
            && (double)rand_r(&seed) / RAND_MAX < atof(cut)) {
            /* The power goes while this sync writes: part of it reached the disk. */
            tear(f, fd);
            kill(getpid(), SIGKILL);
        }
        if (f != NULL) apply(f, fd, f->count);
        pthread_mutex_unlock(&lock);
    }
    return real(fd);
}

int fsync(int fd) {
    init();
    return sync_with(fd, real_fsync);
}

int fdatasync(int fd) {
    init();
    return sync_with(fd, real_fdatasync);
}

int close(int fd) {
    init();
    if (fd >= 0 && fd < MAX_FD) kind[fd] = 0; /* the number may name another file next */
    return real_close(fd);
}

int ftruncate64(int fd, off_t length) {
    init();
    if (classify(fd) == 1) {
        pthread_mutex_lock(&lock);
        struct file *f = file_of(fd, 0);
        for (size_t i = 0; f != NULL && i < f->count; i++) {
            struct extent *e = &f->extents[i];
            if (e->offset >= length) e->length = 0;
            else if (e->offset + (off_t)e->length > length) e->length = (size_t)(length - e->offset);
        }
        pthread_mutex_unlock(&lock);
    }
    return real_ftruncate(fd, length);
}

int ftruncate(int fd, off_t length) { return ftruncate64(fd, length); }

static void journal(const char *line) {
    const char *path = getenv("TENURE_POWER_JOURNAL");
    if (path == NULL) return;
    int fd = real_open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    real_write(fd, line, strlen(line));
    real_close(fd);
}

static void absolute(int dirfd, const char *path, char *out) {
    if (path[0] == '/' || dirfd != AT_FDCWD) {
        snprintf(out, PATH_MAX, "%s", path); /* the server passes absolute paths */
        return;
    }
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) == NULL) cwd[0] = '\0';
    snprintf(out, PATH_MAX, "%s/%s", cwd, path);
}

static void note_create(int dirfd, const char *path, int flags) {
    if (!(flags & O_CREAT)) return;
    char full[PATH_MAX], line[PATH_MAX + 8];
    absolute(dirfd, path, full);
    if (classify_path(full) != 1 || access(full, F_OK) == 0) return;
    snprintf(line, sizeof line, "C\t%s\n", full);
    journal(line);
}

int open64(const char *path, int flags, ...) {
    init();
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list args;
        va_start(args, flags);
        mode = (mode_t)va_arg(args, int);
        va_end(args);
    }
    note_create(AT_FDCWD, path, flags);
    return real_open(path, flags, mode);
}

int open(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list args;
        va_start(args, flags);
        mode = (mode_t)va_arg(args, int);
        va_end(args);
    }
    return open64(path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...) {
    init();
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list args;
        va_start(args, flags);
        mode = (mode_t)va_arg(args, int);
        va_end(args);
    }
    note_create(dirfd, path, flags);
    return real_openat(dirfd, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list args;
        va_start(args, flags);
        mode = (mode_t)va_arg(args, int);
        va_end(args);
    }
    return openat64(dirfd, path, flags, mode);
}

static void note_rename(int olddirfd, const char *old, int newdirfd, const char *new_) {
    char from[PATH_MAX], to[PATH_MAX], line[2 * PATH_MAX + 16];
    absolute(olddirfd, old, from);
    absolute(newdirfd, new_, to);
    if (classify_path(to) != 1) return;
    int kept = 0;
    pthread_mutex_lock(&lock);
    if (access(to, F_OK) == 0 && backup_count < MAX_BACKUPS) {
        snprintf(backups[backup_count], sizeof backups[0], "%s.power-prev", to);
        unlink(backups[backup_count]);
        if (link(to, backups[backup_count]) == 0) {
            backup_count++;
            kept = 1;
        }
    }
    snprintf(line, sizeof line, "R\t%s\t%s\t%d\n", from, to, kept);
    journal(line);
    pthread_mutex_unlock(&lock);
}

int rename(const char *old, const char *new_) {
    init();
    note_rename(AT_FDCWD, old, AT_FDCWD, new_);
    return real_rename(old, new_);
}

int renameat(int olddirfd, const char *old, int newdirfd, const char *new_) {
    init();
    note_rename(olddirfd, old, newdirfd, new_);
    return real_renameat(olddirfd, old, newdirfd, new_);
}

/* delayfs: one file (a volume's image) served through FUSE, every read and write made to wait a fixed time before
 * it reaches the file, as an I/O to a network block volume waits for its round trip. nosqltune attaches a node's
 * loop device to the served file (runtime/delayfs.py), so each I/O the node's filesystem sends to its volume pays
 * the latency; the blkio caps still apply at the loop device above it.
 *
 *   delayfs IMAGE MOUNTPOINT READ_US WRITE_US
 *
 * MOUNTPOINT is an existing regular file; the mount's source names the image ("delayfs:IMAGE"), so whoever finds a
 * loop device on the served file knows which image it uses. Runs in the foreground, one thread per request in
 * flight (up to 256), and ends only when the mount is unmounted (umount MOUNTPOINT): SIGINT, SIGHUP and SIGTERM are
 * ignored, since ending under a mounted filesystem would fail every I/O of a running node (SIGKILL leaves the mount
 * in place, for whoever takes the image next to unmount in order). It asks to be an I/O flusher (PR_SET_IO_FLUSHER,
 * which needs CAP_SYS_RESOURCE: the machines this was written on withhold it even from root), so that its own
 * allocations never wait on the write-back of the filesystem it serves. The image is opened with O_DIRECT:
 * the machine's page cache never holds it, as with the loop device's own direct I/O.
 * Written for nosqltune with libfuse 3's low-level API (3.12 or later for the thread settings). */
#define FUSE_USE_VERSION 312
#define _GNU_SOURCE
#include <fuse_lowlevel.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 4096
#define MAX_THREADS 256
#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

static int image_fd = -1;
static long read_us, write_us;

static void wait_us(long us) {
    struct timespec left = {us / 1000000, (us % 1000000) * 1000};
    while (us > 0 && nanosleep(&left, &left) == -1 && errno == EINTR) {}
}

static void on_init(void *data, struct fuse_conn_info *conn) {
    (void)data;
    /* the loop device's direct I/O arrives as asynchronous requests; the kernel's default of 12 in flight would
       cap a 1 ms volume near 12,000 I/Os per second, so allow as many as there are threads */
    conn->max_background = MAX_THREADS;
    conn->congestion_threshold = MAX_THREADS * 3 / 4;
}

static void on_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)fi;
    struct stat st;
    if (ino != FUSE_ROOT_ID) { fuse_reply_err(req, ENOENT); return; }
    if (fstat(image_fd, &st) != 0) { fuse_reply_err(req, errno); return; }
    st.st_ino = FUSE_ROOT_ID;
    fuse_reply_attr(req, &st, 0);
}

static void on_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    if (ino != FUSE_ROOT_ID) { fuse_reply_err(req, ENOENT); return; }
    fi->direct_io = 1;   /* no page cache of the served file either: every I/O reaches this process */
    fuse_reply_open(req, fi);
}

static void on_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)ino; (void)fi;
    void *buf;
    if (posix_memalign(&buf, ALIGN, size ? size : ALIGN) != 0) { fuse_reply_err(req, ENOMEM); return; }
    wait_us(read_us);
    ssize_t got = pread(image_fd, buf, size, off);
    if (got < 0) fuse_reply_err(req, errno); else fuse_reply_buf(req, buf, (size_t)got);
    free(buf);
}

static void on_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
                     struct fuse_file_info *fi) {
    (void)ino; (void)fi;
    void *buf;   /* O_DIRECT wants an aligned buffer; the request's own is not */
    if (posix_memalign(&buf, ALIGN, size ? size : ALIGN) != 0) { fuse_reply_err(req, ENOMEM); return; }
    memcpy(buf, data, size);
    wait_us(write_us);
    size_t done = 0;   /* all of it or an error: the loop device takes a short write as a whole one */
    int err = 0;
    while (done < size) {
        ssize_t put = pwrite(image_fd, (char *)buf + done, size - done, off + (off_t)done);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) { err = put < 0 ? errno : EIO; break; }
        done += (size_t)put;
    }
    free(buf);
    if (err) fuse_reply_err(req, err); else fuse_reply_write(req, size);
}

static void on_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
    (void)ino; (void)datasync; (void)fi;
    fuse_reply_err(req, fdatasync(image_fd) == 0 ? 0 : errno);
}

static void on_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)ino; (void)fi;
    fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
    .init = on_init, .getattr = on_getattr, .open = on_open, .read = on_read, .write = on_write,
    .fsync = on_fsync, .flush = on_flush,
};

static int parse_us(const char *text, long *out) {
    char *end;
    long value = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < 0 || value > 1000000) return -1;
    *out = value;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5 || parse_us(argv[3], &read_us) || parse_us(argv[4], &write_us)) {
        fprintf(stderr, "usage: delayfs IMAGE MOUNTPOINT READ_US WRITE_US (microseconds, 0-1000000)\n");
        return 2;
    }
    if (strchr(argv[1], ',') || strchr(argv[1], '\\')) {
        fprintf(stderr, "delayfs: the image's path may not hold ',' or '\\': %s\n", argv[1]);
        return 2;
    }
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) != 0)
        fprintf(stderr, "delayfs: PR_SET_IO_FLUSHER: %s (continuing)\n", strerror(errno));
    image_fd = open(argv[1], O_RDWR | O_DIRECT);
    if (image_fd < 0) { fprintf(stderr, "delayfs: cannot open %s: %s\n", argv[1], strerror(errno)); return 1; }
    char options[4200];
    snprintf(options, sizeof options, "allow_other,default_permissions,subtype=delayfs,fsname=delayfs:%s", argv[1]);
    char *fuse_argv[] = {argv[0], "-o", options, NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, fuse_argv);
    struct fuse_session *session = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!session) return 1;
    if (fuse_session_mount(session, argv[2]) != 0) {
        fprintf(stderr, "delayfs: cannot mount on %s\n", argv[2]);
        return 1;
    }
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(config, MAX_THREADS);
    fuse_loop_cfg_set_idle_threads(config, 64);
    int rc = fuse_session_loop_mt(session, config);
    fuse_loop_cfg_destroy(config);
    fuse_session_unmount(session);
    fuse_session_destroy(session);
    return rc ? 1 : 0;
}

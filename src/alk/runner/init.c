/* alk's init, compiled: what runner/init.py does, without starting an interpreter.

   PID 1 of a worker's PID namespace, so that the worker is not: the kernel ignores a signal
   sent to a namespace's PID 1 when its action is the default, so a worker running as PID 1
   survives its own SIGKILL and alk's SIGTERM. This init runs the worker as its child, forwards
   the signals it gets, reaps every orphan, ends the namespace when the worker ends, and
   reports the worker's real exit status on a pipe only it holds.

       init STATUS_FD UID GID GATEWAY -- PROGRAM ARG...

   The same contract as init.py (its docstring says it whole). alk runs it through a
   descriptor of its own (argv[0] is /proc/self/fd/N), so that no file of alk's needs to be
   visible in the sandbox; the init closes that descriptor before the worker starts. A change
   here changes the build's hash: runner/cinit.py builds it again. */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>

static const int FORWARDED[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NFORWARDED (sizeof FORWARDED / sizeof FORWARDED[0])
static volatile pid_t worker = 0;

static void say(const char *text) {
    size_t left = strlen(text);
    while (left > 0) {
        ssize_t n = write(2, text, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        text += n;
        left -= (size_t)n;
    }
}

static void forward(int number) {
    int saved = errno;
    if (worker > 0) kill(worker, number);
    errno = saved;
}

static int number(const char *text, long *out) {
    char *end;
    errno = 0;
    *out = strtol(text, &end, 10);
    return errno == 0 && end != text && *end == '\0';
}

/* The gateway's listener on 127.0.0.1:PORT of this namespace, sent to alk over CHANNEL. */
static void listen_for_gateway(const char *spec) {
    long channel, port;
    char head[32], message[160];
    const char *colon = strchr(spec, ':');
    if (!colon || (size_t)(colon - spec) >= sizeof head) {
        say("alk init: bad gateway spec\n");
        return;
    }
    memcpy(head, spec, (size_t)(colon - spec));
    head[colon - spec] = '\0';
    if (!number(head, &channel) || !number(colon + 1, &port)) {
        say("alk init: bad gateway spec\n");
        return;
    }
    /* bwrap brings the namespace's loopback up; unshare --net leaves it down (127.0.0.1
       binds, but nothing connects). Without the right to (bwrap's init has none), skip. */
    int probe = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
        struct ifreq request;
        memset(&request, 0, sizeof request);
        strcpy(request.ifr_name, "lo");
        request.ifr_flags = IFF_UP | IFF_RUNNING;
        (void)ioctl(probe, SIOCSIFFLAGS, &request);
        close(probe);
    }
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons((unsigned short)port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char data = 'L';
    struct iovec part = {&data, 1};
    union { struct cmsghdr align; char bytes[CMSG_SPACE(sizeof(int))]; } control;
    struct msghdr sent;
    memset(&sent, 0, sizeof sent);
    memset(&control, 0, sizeof control);
    sent.msg_iov = &part;
    sent.msg_iovlen = 1;
    sent.msg_control = control.bytes;
    sent.msg_controllen = sizeof control.bytes;
    struct cmsghdr *rights = CMSG_FIRSTHDR(&sent);
    rights->cmsg_level = SOL_SOCKET;
    rights->cmsg_type = SCM_RIGHTS;
    rights->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(rights), &listener, sizeof(int));
    if (listener < 0
            || setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0
            || bind(listener, (struct sockaddr *)&address, sizeof address) < 0
            || listen(listener, 128) < 0
            || sendmsg((int)channel, &sent, MSG_NOSIGNAL) < 0) {
        snprintf(message, sizeof message, "alk init: no gateway listener on port %ld: "
                 "[Errno %d] %s\n", port, errno, strerror(errno));
        say(message);
    }
    if (listener >= 0) close(listener);
    close((int)channel);
}

/* execvp as Python's os.execvp does it: PATH's folders in order (os.defpath without PATH),
   no shell for a file that is not a program; the first error but "not there" is the one. */
static int run(char **command) {
    if (strchr(command[0], '/')) {
        execv(command[0], command);
        return errno;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    size_t length = strlen(command[0]);
    int last = ENOENT, saved = 0;
    for (const char *at = path;; ) {
        const char *end = strchrnul(at, ':');
        size_t folder = (size_t)(end - at);
        char *full = malloc(folder + length + 2);
        if (!full) return ENOMEM;
        memcpy(full, at, folder);
        size_t used = folder;
        if (folder && at[folder - 1] != '/') full[used++] = '/';
        memcpy(full + used, command[0], length + 1);
        execv(full, command);
        last = errno;
        if (last != ENOENT && last != ENOTDIR && !saved) saved = last;
        free(full);
        if (!*end) break;
        at = end + 1;
    }
    return saved ? saved : last;
}

/* `init --join PROCS... -- PROGRAM ARG...`: the spawn's first step, not an init. Joins the
   repeat's cgroups (writes 0 to each cgroup.procs) and runs PROGRAM, so that alk need not
   run Python code in its forked child to do it: that child could then be a vfork, not a copy
   of alk's whole address space (about 25 ms a spawn at alk's size, against 1). */
static int join_and_run(int argc, char **argv) {
    int at = 2;
    for (; at < argc && strcmp(argv[at], "--") != 0; at++) {
        int fd = open(argv[at], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1) {
            char message[512];
            snprintf(message, sizeof message, "alk init: cannot join %s: %s\n", argv[at],
                     strerror(errno));
            say(message);
            _exit(125);
        }
        close(fd);
    }
    if (at + 1 >= argc) {
        say("alk init: usage: init --join PROCS... -- PROGRAM ARG...\n");
        return 2;
    }
    long self_fd;
    if (strncmp(argv[0], "/proc/self/fd/", 14) == 0 && number(argv[0] + 14, &self_fd))
        close((int)self_fd);
    execvp(argv[at + 1], argv + at + 1);
    char message[512];
    snprintf(message, sizeof message, "alk init: cannot run '%s': %s\n", argv[at + 1],
             strerror(errno));
    say(message);
    return 127;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--join") == 0) return join_and_run(argc, argv);
    long status_fd, uid = -1, gid = -1;
    if (argc < 7 || strcmp(argv[5], "--") != 0 || !number(argv[1], &status_fd)
            || (strcmp(argv[2], "-") && !number(argv[2], &uid))
            || (strcmp(argv[3], "-") && !number(argv[3], &gid))) {
        say("alk init: usage: init STATUS_FD UID GID GATEWAY -- PROGRAM ARG...\n");
        return 2;
    }
    long self_fd;
    if (strncmp(argv[0], "/proc/self/fd/", 14) == 0 && number(argv[0] + 14, &self_fd))
        close((int)self_fd);  /* the descriptor alk ran this through: not the worker's */
    char **command = argv + 6;
    /* A status line written to a pipe alk closed is an error to ignore, not a death; a worker
       it starts gets SIGPIPE at its default again. With SIGCHLD ignored (inherited), the
       kernel would reap the worker before it could be waited for. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGCHLD, SIG_DFL);
    if (strcmp(argv[4], "-") != 0) listen_for_gateway(argv[4]);
    if (getuid() != 0)
        /* Same user as the worker: without this it could open /proc/1/fd/STATUS_FD and forge
           the status line, or trace this process. */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

    /* Handlers before the fork, and the signals held until the worker's pid is known: one
       that comes in between is forwarded, not lost. */
    sigset_t forwarded, before;
    sigemptyset(&forwarded);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = forward;
    action.sa_flags = SA_RESTART;
    sigfillset(&action.sa_mask);
    for (size_t i = 0; i < NFORWARDED; i++) {
        sigaction(FORWARDED[i], &action, NULL);
        sigaddset(&forwarded, FORWARDED[i]);
    }
    sigprocmask(SIG_BLOCK, &forwarded, &before);
    pid_t child = fork();
    if (child < 0) {
        char message[128];
        snprintf(message, sizeof message, "alk init: cannot fork: %s\n", strerror(errno));
        say(message);
        _exit(1);
    }
    if (child == 0) {
        close((int)status_fd);
        /* The worker gets the dispositions a worker with no init has: the default for the
           forwarded signals, and for SIGPIPE (which this process ignores) and SIGXFSZ. */
        signal(SIGPIPE, SIG_DFL);
        signal(SIGXFSZ, SIG_DFL);
        for (size_t i = 0; i < NFORWARDED; i++) signal(FORWARDED[i], SIG_DFL);
        sigprocmask(SIG_SETMASK, &before, NULL);
        int error = 0;
        if (uid >= 0 && (setgroups(0, NULL) < 0 || setgid((gid_t)gid) < 0
                         || setuid((uid_t)uid) < 0))
            error = errno;
        if (!error) error = run(command);
        char message[4096];
        snprintf(message, sizeof message, "alk init: cannot run '%s': %s\n", command[0],
                 strerror(error));
        say(message);
        _exit(127);
    }
    worker = child;
    sigprocmask(SIG_SETMASK, &before, NULL);

    int status = 0, seen = 0;
    for (;;) {
        int code;
        pid_t pid = waitpid(-1, &code, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            break;  /* ECHILD: nobody is left */
        }
        if (pid == child) {
            status = code;
            seen = 1;
            kill(-1, SIGKILL);  /* the rest of the namespace ends with the worker */
        }
    }
    char line[32];
    int code;
    if (!seen) {
        code = 255;
        snprintf(line, sizeof line, "exit 255\n");
    } else if (WIFSIGNALED(status)) {
        code = 128 + WTERMSIG(status);
        snprintf(line, sizeof line, "signal %d\n", WTERMSIG(status));
    } else {
        code = WEXITSTATUS(status);
        snprintf(line, sizeof line, "exit %d\n", code);
    }
    ssize_t written;
    do written = write((int)status_fd, line, strlen(line)); while (written < 0 && errno == EINTR);
    _exit(code & 0xFF);
}

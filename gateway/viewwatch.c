/* viewwatch.c — see viewwatch.h. */
#include "gateway/viewwatch.h"

#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#define QUIET_MS 100

struct viewwatch {
	int fd;
	void (*changed)(void *ctx);
	void *ctx;
	atomic_bool stop;
	pthread_t thread;
};

static bool counts(const char *name)
{
	size_t n = strlen(name);
	return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".json") == 0;
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *watch_main(void *arg)
{
	struct viewwatch *w = arg;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool pending = false;
	long long last = 0;
	while (!atomic_load(&w->stop)) {
		struct pollfd p = { .fd = w->fd, .events = POLLIN };
		int r = poll(&p, 1, pending ? QUIET_MS / 2 : 200);
		if (r > 0) {
			ssize_t len = read(w->fd, buf, sizeof buf);
			for (char *q = buf; len > 0 && q < buf + len;) {
				struct inotify_event *ev = (struct inotify_event *)q;
				if (ev->len && counts(ev->name)) {
					pending = true;
					last = now_ms();
				}
				if (ev->mask & IN_Q_OVERFLOW) {
					pending = true;
					last = now_ms();
				}
				q += sizeof *ev + ev->len;
			}
		}
		if (pending && now_ms() - last >= QUIET_MS) {
			pending = false;
			w->changed(w->ctx);
		}
	}
	return NULL;
}

int viewwatch_start(const char *dir, void (*changed)(void *ctx), void *ctx,
		    struct viewwatch **out)
{
	struct viewwatch *w = calloc(1, sizeof *w);
	if (!w)
		return -ENOMEM;
	w->changed = changed;
	w->ctx = ctx;
	atomic_init(&w->stop, false);
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	int rc = 0;
	if (w->fd < 0 ||
	    inotify_add_watch(w->fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM |
					  IN_DELETE | IN_ATTRIB) < 0) {
		rc = -errno;
		log_error("%s: cannot watch for filter file changes: %s", dir, strerror(-rc));
	} else if ((rc = -pthread_create(&w->thread, NULL, watch_main, w)) < 0) {
		log_error("view watcher thread: %s", strerror(-rc));
	}
	if (rc < 0) {
		if (w->fd >= 0)
			close(w->fd);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

void viewwatch_stop(struct viewwatch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, true);
	pthread_join(w->thread, NULL);
	close(w->fd);
	free(w);
}

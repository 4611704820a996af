/* opcost-vminit: the whole userland of a virtual machine opcost boots
 * (src/opcost/targets/vm.py), with the static probe beside it in the
 * initramfs. Static, libc only, no shell.
 *
 * It mounts /proc, /sys and /dev, reads its job from /opcost/job, runs each
 * command in it (the probe, /opcost/probe, with the arguments given) one
 * after the other, and writes what they print to the data port (DATA_PORT
 * when the machine has it, else the console), every line framed so that the host
 * can tell it from kernel messages and from garbage:
 *
 *     @OPC <seq> <crc32 of payload, 8 hex> <payload>
 *
 * where seq counts framed lines from 0 and payload is one of
 *     B <facts JSON>               once, before the first command: the guest
 *                                  (uname, /proc/cmdline, the clocksource, sysfs's
 *                                  vulnerabilities, and boot_mitigations: the
 *                                  kernel log's lines on what it enabled)
 *     C <i> start                  command i begins
 *     O <i> <line>                 a line command i printed on stdout
 *     E <i> <line>                 a line command i printed on stderr
 *     X <i> <status>               command i ended: exit status, or -signal
 *     K _text <hex address>        where the kernel's text starts in this boot
 *                                  (_text, or _stext where kallsyms has no _text)
 *                                  (KASLR moves it every boot), when the job
 *                                  asks (the file /opcost/want-kallsyms)
 *     K <hex offset> <name>        a kernel text symbol (t/T of /proc/kallsyms,
 *                                  no module's) at _text + offset, when that
 *                                  file says "full": the functions opcost's
 *                                  counting plugin attributes instructions to
 *     Z <n>                        every command ran: n of them; power off
 *     F <message>                  the init itself failed (then power off)
 *
 *     R ready                      (only with /opcost/wait, below) the guest
 *                                  is up and waits for its job on the data
 *                                  port; the frames after the job count from
 *                                  seq 0 again
 *
 * With the file /opcost/wait in the initramfs (a counting boot that the host
 * snapshots, src/opcost/targets/vm/restore.py), the job is not read from
 * /opcost/job: once up, the init says "R ready" and reads it from the data
 * port, the job file's lines as below, then "want full|text" (or no such
 * line: no symbols) and a last line "go"; the host saves the machine while
 * it waits there, and every guest restored from that snapshot reads its own
 * job. It writes the job into /opcost/job and goes on as a fresh boot would.
 *
 * The job file: the first line is "opcost-vminit/1"; then blocks, each
 * lines of "arg VALUE" (argv[1..], in order) and "env NAME=VALUE", and at
 * most one "exe PATH" (the executable to run instead of /opcost/probe: a
 * probe that `opcost variants` built, also in the initramfs), closed by a
 * line "end". Values cannot contain a newline (opcost refuses them).
 *
 * It never hangs and never returns: whatever happens it powers the machine
 * off (reboot(RB_POWER_OFF), then RB_AUTOBOOT, which QEMU's -no-reboot turns
 * into an exit); a kernel panic reboots (panic=-1 on the command line). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define PROBE "/opcost/probe"
#define JOB "/opcost/job"
#define MAX_ARGS 256
#define MAX_ENV 32
#define LINE_MAX_BYTES 65536

static int out_fd = 1;
static unsigned long seq;

static uint32_t crc32(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & -(c & 1u));
	}
	return c ^ 0xffffffffu;
}

static void write_all(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(out_fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

/* One framed line; the payload is cut at a newline or a NUL (never in it). */
static void frame(const char *payload, size_t n)
{
	static char buf[LINE_MAX_BYTES + 64];
	if (n > LINE_MAX_BYTES)
		n = LINE_MAX_BYTES;
	int h = snprintf(buf, 64, "@OPC %lu %08x ", seq++, crc32((const unsigned char *)payload, n));
	memcpy(buf + h, payload, n);
	buf[h + n] = '\n';
	write_all(buf, (size_t)h + n + 1);
}

static void framef(const char *fmt, ...)
{
	char b[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	frame(b, (size_t)n < sizeof(b) ? (size_t)n : sizeof(b) - 1);
}

static void __attribute__((noreturn)) power_off(void)
{
	sync();
	reboot(RB_POWER_OFF);
	reboot(RB_AUTOBOOT);
	for (;;)
		pause();
}

static void __attribute__((noreturn)) fail(const char *what)
{
	framef("F %s: %s", what, strerror(errno));
	power_off();
}

/* ---- the guest's facts, as one JSON object ---------------------------- */

struct jbuf {
	char *p;
	size_t n, cap;
};

static void jput(struct jbuf *j, const char *s, size_t n)
{
	if (j->n + n + 1 > j->cap) {
		size_t cap = (j->cap + n + 1) * 2;
		char *p = realloc(j->p, cap);
		if (!p)
			return;
		j->p = p;
		j->cap = cap;
	}
	memcpy(j->p + j->n, s, n);
	j->n += n;
	j->p[j->n] = 0;
}

static void jstr(struct jbuf *j, const char *s)
{
	jput(j, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char e[8];
		if (c == '"' || c == '\\') {
			e[0] = '\\';
			e[1] = (char)c;
			jput(j, e, 2);
		} else if (c < 0x20 || c >= 0x7f) {
			snprintf(e, sizeof(e), "\\u%04x", c);
			jput(j, e, 6);
		} else {
			jput(j, s, 1);
		}
	}
	jput(j, "\"", 1);
}

static void jkey(struct jbuf *j, const char *k)
{
	if (j->n > 1 && j->p[j->n - 1] != '{')
		jput(j, ",", 1);
	jstr(j, k);
	jput(j, ":", 1);
}

/* A small file's content, trailing newlines dropped; "" when unreadable. */
static const char *slurp(const char *path, char *buf, size_t cap)
{
	buf[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return buf;
	size_t n = 0;
	ssize_t r;
	while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	buf[n] = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return buf;
}

/* The kernel log's lines about speculative-execution mitigations (what the
 * kernel enabled at boot: "Kernel/User page tables isolation: enabled",
 * "Spectre V2 : Mitigation: Retpolines", ...), as a JSON array: sysfs's
 * vulnerabilities say what the CPU model claims, these what this boot did.
 * Read with klogctl (the whole ring buffer, whatever the console's
 * loglevel: `quiet` does not hide them), the "<level>[time] " prefix
 * dropped; at most MITIGATION_LINES lines of at most 200 bytes. */
#define MITIGATION_LINES 48
static const char *const mitigation_words[] = {
	"mitigation", "isolation", "spectre", "meltdown", "vulnerab", "speculat", "retbleed",
	"srbds", "l1tf", "mds:", "taa:", "mmio stale", "gds:", "srso", "ibpb", "ibrs", NULL,
};

static int mitigation_line(const char *s)
{
	char low[256];
	size_t n = 0;
	for (; s[n] && n + 1 < sizeof(low); n++)
		low[n] = (char)((s[n] >= 'A' && s[n] <= 'Z') ? s[n] + 32 : s[n]);
	low[n] = 0;
	for (int i = 0; mitigation_words[i]; i++)
		if (strstr(low, mitigation_words[i]))
			return 1;
	return 0;
}

static void boot_mitigations(struct jbuf *j)
{
	jput(j, "[", 1);
	int size = klogctl(10, NULL, 0); /* SYSLOG_ACTION_SIZE_BUFFER */
	char *log = size > 0 ? malloc((size_t)size + 1) : NULL;
	int n = log ? klogctl(3, log, size) : -1; /* SYSLOG_ACTION_READ_ALL */
	int kept = 0;
	if (n > 0) {
		log[n] = 0;
		for (char *line = log, *next; line && *line && kept < MITIGATION_LINES; line = next) {
			next = strchr(line, '\n');
			if (next)
				*next++ = 0;
			char *msg = line;
			if (*msg == '<') { /* <level> */
				char *e = strchr(msg, '>');
				msg = e ? e + 1 : msg;
			}
			if (*msg == '[') { /* [    0.123456] with printk.time */
				char *e = strchr(msg, ']');
				msg = e ? e + 1 : msg;
				while (*msg == ' ')
					msg++;
			}
			if (!mitigation_line(msg))
				continue;
			if (strlen(msg) > 200)
				msg[200] = 0;
			if (kept++)
				jput(j, ",", 1);
			jstr(j, msg);
		}
	}
	free(log);
	jput(j, "]", 1);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The boot CPU's loops_per_jiffy as the kernel's log says it ("Calibrating
 * delay loop ... (lpj=N)"), read with one syslog(2) READ_ALL: opcost passes
 * it back as lpj= on the next boots of this kernel, which then skip
 * calibrating the delay loop on every other CPU (a fifth of a second of a
 * boot under TCG). "" when the log does not say. */
static void lpj_of_log(char *out, size_t cap)
{
	out[0] = 0;
	int size = klogctl(10, NULL, 0);   /* SYSLOG_ACTION_SIZE_BUFFER */
	if (size <= 0)
		return;
	char *log = malloc((size_t)size + 1);
	if (!log)
		return;
	int n = klogctl(3, log, size);     /* SYSLOG_ACTION_READ_ALL */
	if (n > 0) {
		log[n] = 0;
		char *cal = strstr(log, "Calibrating delay loop");
		char *at = cal ? strstr(cal, "(lpj=") : NULL;
		if (at) {
			at += 5;
			size_t k = 0;
			while (k + 1 < cap && at[k] >= '0' && at[k] <= '9') {
				out[k] = at[k];
				k++;
			}
			out[k] = 0;
		}
	}
	free(log);
}

static void facts(void)
{
	struct jbuf j = {0};
	char buf[4096];
	struct utsname u;
	jput(&j, "{", 1);
	if (uname(&u) == 0) {
		jkey(&j, "release");
		jstr(&j, u.release);
		jkey(&j, "machine");
		jstr(&j, u.machine);
	}
	jkey(&j, "proc_version");
	jstr(&j, slurp("/proc/version", buf, sizeof(buf)));
	jkey(&j, "cmdline");
	jstr(&j, slurp("/proc/cmdline", buf, sizeof(buf)));
	jkey(&j, "clocksource");
	jstr(&j, slurp("/sys/devices/system/clocksource/clocksource0/current_clocksource", buf, sizeof(buf)));
	jkey(&j, "lpj");
	lpj_of_log(buf, 24);
	jstr(&j, buf);
	jkey(&j, "cpus_online");
	jstr(&j, slurp("/sys/devices/system/cpu/online", buf, sizeof(buf)));
	jkey(&j, "vulnerabilities");
	jput(&j, "{", 1);
	const char *vd = "/sys/devices/system/cpu/vulnerabilities";
	DIR *d = opendir(vd);
	if (d) {
		char *names[128];
		int n = 0;
		struct dirent *e;
		while ((e = readdir(d)) && n < 128)
			if (e->d_name[0] != '.')
				names[n++] = strdup(e->d_name);
		closedir(d);
		qsort(names, (size_t)n, sizeof(names[0]), cmp_str);
		for (int i = 0; i < n; i++) {
			char path[512];
			snprintf(path, sizeof(path), "%s/%s", vd, names[i]);
			jkey(&j, names[i]);
			jstr(&j, slurp(path, buf, sizeof(buf)));
			free(names[i]);
		}
	}
	jput(&j, "}", 1);
	jkey(&j, "boot_mitigations");
	boot_mitigations(&j);
	jput(&j, "}", 1);
	if (j.p) {
		char *line = malloc(j.n + 3);
		if (line) {
			memcpy(line, "B ", 2);
			memcpy(line + 2, j.p, j.n + 1);
			frame(line, j.n + 2);
			free(line);
		}
		free(j.p);
	}
}

/* /proc/kallsyms, as /opcost/want-kallsyms asks: "text" sends where the
 * kernel's text starts in this boot, "full" also every kernel text symbol as
 * an offset from it (the same for every boot of one kernel image). */
static void kallsyms(void)
{
	char want[16] = "";
	if (!slurp("/opcost/want-kallsyms", want, sizeof(want)) || !want[0])
		return;
	int full = strncmp(want, "full", 4) == 0;
	int k = open("/proc/sys/kernel/kptr_restrict", O_WRONLY | O_CLOEXEC);
	if (k >= 0) { /* addresses, not zeros, for root */
		ssize_t w = write(k, "0", 1);
		(void)w;
		close(k);
	}
	FILE *f = fopen("/proc/kallsyms", "re");
	if (!f) {
		framef("K error %s", strerror(errno));
		return;
	}
	char line[512], name[256], type;
	unsigned long long addr, text = 0, stext = 0;
	/* the base: _text, or _stext where kallsyms lists no _text (arm64: its
	 * image head is not in the kernel's text ranges) */
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3)
			continue;
		if (strcmp(name, "_text") == 0) {
			text = addr;
			break;
		}
		if (strcmp(name, "_stext") == 0 && !stext)
			stext = addr;
	}
	if (!text)
		text = stext;
	framef("K _text %llx", text);
	if (full && text) {
		rewind(f);
		while (fgets(line, sizeof(line), f)) {
			if (strchr(line, '[')) /* a module's */
				continue;
			if (sscanf(line, "%llx %c %255s", &addr, &type, name) == 3 && (type == 't' || type == 'T') &&
			    addr >= text)
				framef("K %llx %s", addr - text, name);
		}
	}
	fclose(f);
}

/* ---- the job ------------------------------------------------------------- */

struct cmd {
	const char *exe;
	char *argv[MAX_ARGS + 2];
	int argc;
	char *envp[MAX_ENV + 1];
	int envc;
};

/* Reads the next command of the job; 1 when one was read, 0 at the end. */
static int next_cmd(FILE *f, struct cmd *c)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	memset(c, 0, sizeof(*c));
	c->exe = PROBE;
	c->argv[c->argc++] = PROBE;
	int any = 0;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = 0;
		any = 1;
		if (strcmp(line, "end") == 0) {
			free(line);
			return 1;
		}
		if (strncmp(line, "arg ", 4) == 0 && c->argc < MAX_ARGS)
			c->argv[c->argc++] = strdup(line + 4);
		else if (strncmp(line, "env ", 4) == 0 && c->envc < MAX_ENV)
			c->envp[c->envc++] = strdup(line + 4);
		else if (strncmp(line, "exe /", 5) == 0)
			c->exe = c->argv[0] = strdup(line + 4);
		else {
			framef("F job: unexpected line '%.200s'", line);
			power_off();
		}
	}
	free(line);
	if (any) {
		framef("F job: the last command has no 'end'");
		power_off();
	}
	return 0;
}

/* Frames every complete line in buf (stream tag, command i); keeps the rest. */
static void drain(char tag, int i, char *buf, size_t *len, int final)
{
	size_t start = 0;
	for (size_t k = 0; k < *len; k++) {
		if (buf[k] == '\n' || buf[k] == 0) {
			char head[32];
			int h = snprintf(head, sizeof(head), "%c %d ", tag, i);
			static char line[LINE_MAX_BYTES + 32];
			size_t n = k - start;
			if (n > LINE_MAX_BYTES)
				n = LINE_MAX_BYTES;
			memcpy(line, head, (size_t)h);
			memcpy(line + h, buf + start, n);
			frame(line, (size_t)h + n);
			start = k + 1;
		}
	}
	if (final && start < *len) {   /* a partial last line: framed as it is */
		buf[*len] = '\n';
		size_t keep = *len + 1;
		*len = keep;
		drain(tag, i, buf, len, 0);
		return;
	}
	memmove(buf, buf + start, *len - start);
	*len -= start;
	if (*len >= LINE_MAX_BYTES) {   /* an endless line: framed in pieces */
		buf[*len] = '\n';
		(*len)++;
		drain(tag, i, buf, len, 0);
	}
}

static void run_cmd(int i, struct cmd *c)
{
	int out[2], err[2];
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		fail("pipe");
	framef("C %d start", i);
	pid_t pid = fork();
	if (pid < 0)
		fail("fork");
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		int null = open("/dev/null", O_RDONLY);
		if (null >= 0)
			dup2(null, 0);
		execve(c->exe, c->argv, c->envp);
		dprintf(2, "opcost-vminit: cannot start %s: %s\n", c->exe, strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	static char bo[LINE_MAX_BYTES + 2], be[LINE_MAX_BYTES + 2];
	size_t lo = 0, le = 0;
	struct pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
	int open_n = 2;
	while (open_n > 0) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fail("poll");
		}
		for (int k = 0; k < 2; k++) {
			if (p[k].fd < 0 || !(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char *b = k == 0 ? bo : be;
			size_t *l = k == 0 ? &lo : &le;
			ssize_t r = read(p[k].fd, b + *l, LINE_MAX_BYTES - *l);
			if (r <= 0) {
				if (r < 0 && errno == EINTR)
					continue;
				drain(k == 0 ? 'O' : 'E', i, b, l, 1);
				close(p[k].fd);
				p[k].fd = -1;
				open_n--;
				continue;
			}
			*l += (size_t)r;
			drain(k == 0 ? 'O' : 'E', i, b, l, 0);
		}
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			fail("waitpid");
	framef("X %d %d", i, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
}

/* The data port, as QEMU is given it (src/opcost/targets/vm/arch.py): on
 * x86_64 the second serial port (kernel messages stay on ttyS0); on arm64 a
 * PCI 16550 (pci-serial), the first 8250 port there (the console is the
 * PL011, ttyAMA0). */
#if defined(__aarch64__)
#define DATA_PORT "/dev/ttyS0"
#else
#define DATA_PORT "/dev/ttyS1"
#endif

static void data_port(void)
{
	/* DATA_PORT when the machine has one, else the console this init was
	 * given. */
	int fd = open(DATA_PORT, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0) {
		struct termios t;
		if (tcgetattr(fd, &t) == 0) {
			cfmakeraw(&t);
			cfsetospeed(&t, B115200);
			tcsetattr(fd, TCSANOW, &t);
			out_fd = fd;
			return;
		}
		close(fd);
	}
	fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0)
		out_fd = fd;
}

/* The job from the data port (/opcost/wait: see the top), into /opcost/job
 * and /opcost/want-kallsyms; seq starts again from 0 after it. */
static void receive_job(void)
{
	int fd = open(DATA_PORT, O_RDONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		fail("open " DATA_PORT " to read the job");
	struct termios t;
	if (tcgetattr(fd, &t) == 0) {
		cfmakeraw(&t);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tcsetattr(fd, TCSANOW, &t);
	}
	FILE *in = fdopen(fd, "r");
	FILE *job = fopen(JOB, "we");
	if (!in || !job)
		fail("receive the job");
	framef("R ready");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int go = 0;
	while (!go && (n = getline(&line, &cap, in)) > 0) {
		if (strcmp(line, "go\n") == 0)
			go = 1;
		else if (strncmp(line, "want ", 5) == 0) {
			int w = open("/opcost/want-kallsyms", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (w < 0 || write(w, line + 5, (size_t)n - 5) != n - 5)
				fail("write /opcost/want-kallsyms");
			close(w);
		} else if (fwrite(line, 1, (size_t)n, job) != (size_t)n)
			fail("write " JOB);
	}
	free(line);
	fclose(in);
	if (!go || fclose(job) != 0) {
		framef("F job: the data port closed before its 'go'");
		power_off();
	}
	seq = 0;
}

int main(void)
{
	if (getpid() != 1) {
		fprintf(stderr, "opcost-vminit: the init of a virtual machine opcost boots; not for running here\n");
		return 2;
	}
	mkdir("/proc", 0555);
	mkdir("/sys", 0555);
	mkdir("/dev", 0755);
	mkdir("/tmp", 01777);
	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	data_port();
	signal(SIGPIPE, SIG_IGN);
	if (access("/opcost/wait", F_OK) == 0)
		receive_job();
	facts();
	kallsyms();
	FILE *f = fopen(JOB, "re");
	if (!f)
		fail("open " JOB);
	char head[64];
	if (!fgets(head, sizeof(head), f) || strcmp(head, "opcost-vminit/1\n") != 0) {
		framef("F job: not an opcost-vminit/1 job");
		power_off();
	}
	struct cmd c;
	int i = 0;
	while (next_cmd(f, &c))
		run_cmd(i++, &c);
	fclose(f);
	framef("Z %d", i);
	power_off();
}

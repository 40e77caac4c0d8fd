/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_perf.c - `gpuwire perf`: options, server / client / --loopback. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perf.h"
#include "subcommands.h"

static void usage(FILE *f)
{
    fprintf(f,
        "usage: gpuwire perf --server [--port P] [--bind HOST] [--once] [--name AGENT]\n"
        "       gpuwire perf HOST[:P] [options]\n"
        "       gpuwire perf --peer AGENT [options]\n"
        "       gpuwire perf --loopback [options]\n"
        "\n"
        "Measures one operation between two processes, perftest-style.  For each size it\n"
        "runs a latency phase (ping-pong; one-way latency = round trip / 2; for get the\n"
        "round trip of one get) and a bandwidth phase (a window of outstanding operations;\n"
        "bandwidth in GB/s = 1e9 bytes/s, message rate = operations/s), and prints one row:\n"
        "bytes, iterations, bandwidth, message rate, latency avg/p50/p99 and the CPU use of\n"
        "each side during the bandwidth phase (getrusage user+system over wall time).\n"
        "When other processes used a quarter of a CPU or more during a size's phases,\n"
        "a line after the table says so (its figures may not repeat).\n"
        "\n"
        "  -o, --op OP          put (default), get, send or put_notify\n"
        "  -s, --size S         a size (K/M/G suffixes), MIN:MAX (powers of two from MIN to\n"
        "                       MAX) or a comma list; default 8:1M\n"
        "  -n, --iters N        operations per phase (default: run for --duration)\n"
        "  -d, --duration SEC   seconds per phase and size (default 1)\n"
        "  -w, --window W       outstanding operations in the bandwidth phase (default 32)\n"
        "  -c, --check          verify every payload (pattern written, read back, compared)\n"
        "  -j, --json           one JSON object per size per line, nothing else on stdout\n"
        "  -b, --busy-poll      never sleep: spin on gw_progress() (lowest latency when\n"
        "                       each side has a core of its own)\n"
        "      --wait           client: wait for each latency-phase operation with\n"
        "                       gw_request_wait() (GPUWIRE_SPIN_US, then the context\n"
        "                       fd), as an application would, instead of its own loop\n"
        "      --mem KIND       this side's buffer: host (default), cuda or cuda:N (GPU N's\n"
        "                       memory; the path taken, e.g. dma-buf or staging, is printed)\n"
        "      --spin-us US     spin this long without events, then sleep on the context\n"
        "                       fd; default auto: 200 (a round trip on loopback fits) when\n"
        "                       the machine has more CPUs than spinning processes (2 for\n"
        "                       --loopback, else 1), 0 (sleep at once) otherwise\n"
        "      --batch N        each operation is one batched transfer (gw_xfer_batch) of N\n"
        "                       descriptors of --size bytes, scattered over both buffers one\n"
        "                       --size apart; bandwidth phase only; MsgRate counts descriptors\n"
        "                       (--op put or get)\n"
        "      --pages          with --batch: the paged form (gw_xfer_pages) instead of lists\n"
        "      --indices        with --batch (lists): select the entries by index arrays\n"
        "                       (0, 1, 2, ...) instead of all entries (NULL arrays)\n"
        "      --alloc          both buffers from gw_mem_alloc (host memory shared with\n"
        "                       local peers: the intra transport copies into it directly)\n"
        "      --hugepages      host buffers on both sides from 2 MiB boundaries, advised\n"
        "                       MADV_HUGEPAGE (transparent huge pages: no 4 KiB page walks)\n"
        "      --reference      after the table, what this machine does without gpuwire:\n"
        "                       memcpy of the largest size in one thread (GB/s) and a\n"
        "                       one-byte pipe ping-pong between two processes (us one\n"
        "                       way), each beside gpuwire's figure as a ratio\n"
        "      --lat-only       only the latency phase\n"
        "      --bw-only        only the bandwidth phase\n"
        "  -S, --server         wait for clients (one at a time)\n"
        "  -p, --port P         server port, or the client's default port (%d)\n"
        "      --bind HOST      server: listen on this address only\n"
        "      --once           server: exit after one client\n"
        "      --name AGENT     server: serve as agent AGENT (registered in GPUWIRE_DIRECTORY\n"
        "                       when set; see docs/NAMES.md)\n"
        "      --peer AGENT     client: reach agent AGENT by name: its address comes from\n"
        "                       GPUWIRE_PEERS or the directory (GPUWIRE_DIRECTORY)\n"
        "  -l, --loopback       start a server on 127.0.0.1 in a child process and measure\n"
        "      --table N        descriptor tables at serving scale, in this process (the target\n"
        "                       a second context with a progress thread): builds a local and a\n"
        "                       remote table of N entries of --size bytes (default 64) with\n"
        "                       gw_dlist_*_table, prints the build time, then posts transfers of\n"
        "                       --select K entries (default min(N, 327680)) picked by random\n"
        "                       index arrays and prints the post cost (ns/entry, entries/s), the\n"
        "                       figure for 327,680 entries, and the transfer's GB/s; the first\n"
        "                       transfer is checked entry by entry\n"
        "      --reg            registration cost by memory kind, in this process: gw_mem_reg\n"
        "                       and gw_mem_dereg of a --size region (default 256M) of host memory\n"
        "                       (touched, untouched), pinned host memory, CUDA memory and VMM\n"
        "                       memory (the last three where a GPU is present, skipped with the\n"
        "                       reason otherwise; --mem cuda:N picks the GPU); prints ms, ms per\n"
        "                       GiB, and the cost of registering a sub-range of the registered\n"
        "                       region again (a tensor inside an allocator segment)\n"
        "  -h, --help           this text\n"
        "\n"
        "The transport is chosen as by any gpuwire program (GPUWIRE_TRANSPORTS etc.;\n"
        "see `gpuwire info`); the header line names the transport and path taken.\n",
        PERF_DEFAULT_PORT);
}

/* "host" -> "host:port", "h:p" and "[v6]:p" as given, "v6" -> "[v6]:port". */
static void make_addr(const char *target, unsigned port, char *buf, size_t len)
{
    const char *first = strchr(target, ':');
    if (target[0] == '[' && strstr(target, "]:"))
        snprintf(buf, len, "%s", target);
    else if (target[0] == '[')
        snprintf(buf, len, "%s:%u", target, port);
    else if (first && strchr(first + 1, ':'))
        snprintf(buf, len, "[%s]:%u", target, port);
    else if (first)
        snprintf(buf, len, "%s", target);
    else
        snprintf(buf, len, "%s:%u", target, port);
}

static int run_loopback(perf_opts_t *o)
{
    int fds[2];
    if (pipe(fds) != 0) {
        fprintf(stderr, "gpuwire perf: pipe() failed: %s\n", strerror(errno));
        return 1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gpuwire perf: fork() failed: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        close(fds[0]);
        perf_opts_t so = *o;
        so.server = 1;
        so.once = 1;
        so.bind = "127.0.0.1";
        so.port = 0;
        so.addr_fd = fds[1];
        int rc = perf_server(&so);
        fflush(stdout);
        _exit(rc);
    }
    close(fds[1]);
    char addr[128];
    size_t got = 0;
    int rc = 1;
    while (got < sizeof(addr)) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        if (poll(&p, 1, 30000) <= 0)
            break;
        ssize_t n = read(fds[0], addr + got, sizeof(addr) - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (memchr(addr, '\0', got))
            break;
    }
    close(fds[0]);
    if (!got || !memchr(addr, '\0', got)) {
        fprintf(stderr, "gpuwire perf --loopback: the server process did not start (see above)\n");
        kill(pid, SIGTERM);
    } else {
        o->peer_pid = (int)pid;
        rc = perf_client(o, addr);
        if (rc)
            kill(pid, SIGTERM);
    }
    /* the server exits after its one client; give it a moment, then insist */
    int status = 0;
    for (int i = 0; i < 500; i++) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (i == 499) {
            fprintf(stderr, "gpuwire perf --loopback: the server process did not exit: killed\n");
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
        usleep(10000);
    }
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        fprintf(stderr, "gpuwire perf --loopback: the server process failed (status 0x%x)\n",
                status);
        rc = 1;
    }
    return rc;
}

enum { OPT_REF = 255, OPT_LAT_ONLY = 256, OPT_BW_ONLY, OPT_BIND, OPT_ONCE, OPT_SPIN, OPT_MEM, OPT_ALLOC, OPT_NAME, OPT_PEER, OPT_BATCH, OPT_PAGES, OPT_INDICES, OPT_HUGE, OPT_TABLE, OPT_SELECT, OPT_REG, OPT_WAIT };

int cmd_perf(int argc, char **argv)
{
    static const struct option opts[] = {
        {"op", required_argument, NULL, 'o'},
        {"size", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'd'},
        {"window", required_argument, NULL, 'w'},
        {"check", no_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},
        {"busy-poll", no_argument, NULL, 'b'},
        {"wait", no_argument, NULL, OPT_WAIT},
        {"spin-us", required_argument, NULL, OPT_SPIN},
        {"mem", required_argument, NULL, OPT_MEM},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"pages", no_argument, NULL, OPT_PAGES},
        {"indices", no_argument, NULL, OPT_INDICES},
        {"alloc", no_argument, NULL, OPT_ALLOC},
        {"hugepages", no_argument, NULL, OPT_HUGE},
        {"reference", no_argument, NULL, OPT_REF},
        {"lat-only", no_argument, NULL, OPT_LAT_ONLY},
        {"bw-only", no_argument, NULL, OPT_BW_ONLY},
        {"server", no_argument, NULL, 'S'},
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, OPT_BIND},
        {"once", no_argument, NULL, OPT_ONCE},
        {"name", required_argument, NULL, OPT_NAME},
        {"peer", required_argument, NULL, OPT_PEER},
        {"loopback", no_argument, NULL, 'l'},
        {"table", required_argument, NULL, OPT_TABLE},
        {"select", required_argument, NULL, OPT_SELECT},
        {"reg", no_argument, NULL, OPT_REG},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    perf_opts_t o;
    memset(&o, 0, sizeof(o));
    o.op = PERF_PUT;
    o.window = 32;
    o.duration = 1.0;
    o.spin_us = -1; /* auto */
    o.mem_dev = -1;
    o.port = PERF_DEFAULT_PORT;
    o.addr_fd = -1;
    const char *sizes = "8:1M";
    int sizes_given = 0;
    int c;
    char *end;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:s:n:d:w:cjbSp:lh", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (perf_parse_op(optarg, &o.op) != 0) {
                fprintf(stderr, "gpuwire perf: --op '%s': expected put, get, send or put_notify\n",
                        optarg);
                return 2;
            }
            break;
        case 's':
            sizes = optarg;
            sizes_given = 1;
            break;
        case 'n':
            errno = 0;
            o.iters = strtol(optarg, &end, 10);
            if (errno || *end || o.iters <= 0) {
                fprintf(stderr, "gpuwire perf: --iters '%s': expected a positive integer\n", optarg);
                return 2;
            }
            break;
        case 'd':
            o.duration = strtod(optarg, &end);
            if (*end || !(o.duration > 0) || o.duration > 86400) {
                fprintf(stderr, "gpuwire perf: --duration '%s': expected seconds > 0\n", optarg);
                return 2;
            }
            o.iters = 0;
            break;
        case 'w':
            o.window = (int)strtol(optarg, &end, 10);
            if (*end || o.window < 1 || o.window > PERF_MAX_WINDOW) {
                fprintf(stderr, "gpuwire perf: --window '%s': expected 1..%d\n", optarg,
                        PERF_MAX_WINDOW);
                return 2;
            }
            break;
        case 'c': o.check = 1; break;
        case 'j': o.json = 1; break;
        case 'b': o.busy_poll = 1; break;
        case OPT_WAIT: o.wait = 1; break;
        case OPT_ALLOC: o.alloc = 1; break;
        case OPT_MEM:
            o.mem_dev = perf_parse_mem(optarg);
            if (o.mem_dev < -1) {
                fprintf(stderr, "gpuwire perf: --mem '%s': expected host, cuda or cuda:N\n", optarg);
                return 2;
            }
            break;
        case OPT_SPIN:
            if (strcmp(optarg, "auto") == 0) {
                o.spin_us = -1;
                break;
            }
            o.spin_us = strtol(optarg, &end, 10);
            if (*end || o.spin_us < 0 || o.spin_us > 10000000) {
                fprintf(stderr, "gpuwire perf: --spin-us '%s': expected 0..10000000 or auto\n", optarg);
                return 2;
            }
            break;
        case OPT_BATCH:
            errno = 0;
            o.batch = strtol(optarg, &end, 10);
            if (errno || *end || o.batch < 1 || o.batch > 1000000) {
                fprintf(stderr, "gpuwire perf: --batch '%s': expected 1..1000000 descriptors\n", optarg);
                return 2;
            }
            break;
        case OPT_PAGES: o.pages = 1; break;
        case OPT_INDICES: o.indices = 1; break;
        case OPT_HUGE: o.huge = 1; break;
        case OPT_REF: o.reference = 1; break;
        case OPT_LAT_ONLY: o.no_bw = 1; break;
        case OPT_BW_ONLY: o.no_lat = 1; break;
        case 'S': o.server = 1; break;
        case 'p': {
            long p = strtol(optarg, &end, 10);
            if (*end || p < 0 || p > 65535) {
                fprintf(stderr, "gpuwire perf: --port '%s': expected 0..65535\n", optarg);
                return 2;
            }
            o.port = (unsigned)p;
            break;
        }
        case OPT_BIND: o.bind = optarg; break;
        case OPT_ONCE: o.once = 1; break;
        case OPT_NAME: o.name = optarg; break;
        case OPT_PEER: o.peer = optarg; break;
        case 'l': o.loopback = 1; break;
        case OPT_TABLE:
        case OPT_SELECT: {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno || *end || v < 1 || v > 100000000) {
                fprintf(stderr, "gpuwire perf: --%s '%s': expected 1..100000000 entries\n",
                        c == OPT_TABLE ? "table" : "select", optarg);
                return 2;
            }
            *(c == OPT_TABLE ? &o.table : &o.select) = v;
            break;
        }
        case OPT_REG: o.reg = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (o.select && !o.table) {
        fprintf(stderr, "gpuwire perf: --select goes with --table N\n");
        return 2;
    }
    if (o.table || o.reg) { /* measured in this process: no server, no client */
        if (o.table && o.reg) {
            fprintf(stderr, "gpuwire perf: --table and --reg are separate measurements: give one\n");
            return 2;
        }
        if (o.server || o.loopback || o.peer || optind < argc || o.batch) {
            fprintf(stderr, "gpuwire perf: --%s runs in this process: no --server, --loopback, --batch, peer or "
                            "address\n", o.table ? "table" : "reg");
            return 2;
        }
        if (sizes_given && perf_parse_sizes(sizes, &o.sizes, &o.nsizes) != 0) {
            fprintf(stderr, "gpuwire perf: --size '%s': expected one size (e.g. 64, 4K, 1G)\n", sizes);
            return 2;
        }
        int r = o.table ? perf_table(&o) : perf_reg(&o);
        free(o.sizes);
        return r;
    }
    if ((o.pages || o.indices) && !o.batch) {
        fprintf(stderr, "gpuwire perf: --%s goes with --batch N\n", o.pages ? "pages" : "indices");
        return 2;
    }
    if (o.pages && o.indices) {
        fprintf(stderr, "gpuwire perf: --indices selects list entries; the paged form (--pages) has page indices\n");
        return 2;
    }
    if (o.batch) {
        if (o.op != PERF_PUT && o.op != PERF_GET) {
            fprintf(stderr, "gpuwire perf: --batch measures --op put or get, not %s\n", perf_op_name(o.op));
            return 2;
        }
        if (o.check) {
            fprintf(stderr, "gpuwire perf: --check does not check batched transfers (tests/integration/it_batch does)\n");
            return 2;
        }
        if (o.no_bw) {
            fprintf(stderr, "gpuwire perf: --batch has a bandwidth phase only\n");
            return 2;
        }
        o.no_lat = 1;
    }
    if (o.huge && o.alloc) {
        fprintf(stderr, "gpuwire perf: --hugepages shapes the buffers perf allocates; --alloc's come from gw_mem_alloc\n");
        return 2;
    }
    if (o.huge && o.server) {
        fprintf(stderr, "gpuwire perf: --hugepages is the client's: it asks the server for huge pages too\n");
        return 2;
    }
    if (o.alloc && o.mem_dev >= 0) {
        fprintf(stderr, "gpuwire perf: --alloc gives host memory; it excludes --mem cuda\n");
        return 2;
    }
    if (o.no_lat && o.no_bw) {
        fprintf(stderr, "gpuwire perf: --lat-only and --bw-only exclude each other\n");
        return 2;
    }
    if (optind < argc)
        o.target = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "gpuwire perf: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (o.server + o.loopback + (o.target != NULL) + (o.peer != NULL) != 1) {
        fprintf(stderr, "gpuwire perf: give exactly one of --server, --loopback, HOST[:PORT] or --peer AGENT\n\n");
        usage(stderr);
        return 2;
    }
    if (o.server)
        return perf_server(&o);
    if (perf_parse_sizes(sizes, &o.sizes, &o.nsizes) != 0) {
        fprintf(stderr,
                "gpuwire perf: --size '%s': expected a size (e.g. 4K, 1M), MIN:MAX or a comma "
                "list\n",
                sizes);
        return 2;
    }
    int rc;
    if (o.loopback) {
        rc = run_loopback(&o);
    } else if (o.peer) {
        rc = perf_client(&o, o.peer);
    } else {
        char addr[256];
        make_addr(o.target, o.port, addr, sizeof(addr));
        rc = perf_client(&o, addr);
    }
    free(o.sizes);
    return rc;
}

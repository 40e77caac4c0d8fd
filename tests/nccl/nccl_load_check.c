/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_load_check.c - does a real NCCL (libnccl.so.2) load the plugin?
 *
 *   nccl_load_check [LIBNCCL]   (default: libnccl.so.2 from the loader's path)
 *
 * Run with NCCL_NET_PLUGIN=gpuwire, LD_LIBRARY_PATH holding
 * libnccl-net-gpuwire.so and NCCL_DEBUG=INFO: prints NCCL's version, creates
 * a one-rank communicator (NCCL initialises its network plugin on the way)
 * and destroys it.  The caller checks NCCL's log for the plugin's lines.
 * Exits 77 where libnccl.so.2 or a GPU is missing.  NCCL's types are opaque
 * here: the unique id is 128 bytes, a communicator a pointer.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef struct { char internal[128]; } nccl_uid_t;
typedef int (*get_version_fn)(int *);
typedef int (*get_uid_fn)(nccl_uid_t *);
typedef int (*init_rank_fn)(void **comm, int nranks, nccl_uid_t id, int rank);
typedef int (*destroy_fn)(void *comm);
typedef const char *(*err_str_fn)(int);

int main(int argc, char **argv)
{
    const char *lib = argc > 1 ? argv[1] : "libnccl.so.2";
    /* a GPU first: NCCL needs one to create a communicator */
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*cu_init)(unsigned) = cu ? (int (*)(unsigned))dlsym(cu, "cuInit") : NULL;
    int (*cu_count)(int *) = cu ? (int (*)(int *))dlsym(cu, "cuDeviceGetCount") : NULL;
    int ngpu = 0;
    if (!cu_init || !cu_count || cu_init(0) != 0 || cu_count(&ngpu) != 0 || ngpu < 1) {
        fprintf(stderr, "SKIP: no GPU (libcuda.so.1 %s)\n", cu ? "has no device" : "not found");
        return 77;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "SKIP: cannot load %s: %s\n", lib, dlerror());
        return 77;
    }
    get_version_fn ver = (get_version_fn)dlsym(h, "ncclGetVersion");
    get_uid_fn uid = (get_uid_fn)dlsym(h, "ncclGetUniqueId");
    init_rank_fn init = (init_rank_fn)dlsym(h, "ncclCommInitRank");
    destroy_fn destroy = (destroy_fn)dlsym(h, "ncclCommDestroy");
    err_str_fn estr = (err_str_fn)dlsym(h, "ncclGetErrorString");
    if (!ver || !uid || !init || !destroy || !estr) {
        fprintf(stderr, "%s lacks the NCCL entry points\n", lib);
        return 1;
    }
    int v = 0;
    ver(&v);
    printf("NCCL version code %d (%d.%d.%d)\n", v, v / 10000, v / 100 % 100, v % 100);
    nccl_uid_t id;
    int r = uid(&id);
    if (r != 0) {
        fprintf(stderr, "ncclGetUniqueId: %s\n", estr(r));
        return 1;
    }
    void *comm = NULL;
    r = init(&comm, 1, id, 0);
    if (r != 0) {
        fprintf(stderr, "ncclCommInitRank(1 rank): %s\n", estr(r));
        return 1;
    }
    printf("one-rank communicator created\n");
    r = destroy(comm);
    printf("ncclCommDestroy: %s\n", estr(r));
    return r == 0 ? 0 : 1;
}

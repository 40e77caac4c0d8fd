/* SPDX-License-Identifier: Apache-2.0 */
/* fake_fabric.c - a stand-in libfabric.so.1 for the ofi loader's tests
 * (test_ofi_loader.c): the six entry points gpuwire binds, each under the
 * symbol version it asks for (fake_fabric.map assigns them), and
 * fi_version() answering FAKE_FI_VERSION ("MAJOR.MINOR").  Nothing here fabricates fabric objects:
 * fi_getinfo finds nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct fi_info;
struct fi_fabric_attr;
struct fid_fabric;

int fi_getinfo(uint32_t v, const char *node, const char *svc, uint64_t flags, const struct fi_info *hints,
               struct fi_info **info)
{
    (void)v, (void)node, (void)svc, (void)flags, (void)hints;
    *info = NULL;
    return -61; /* -FI_ENODATA */
}
void fi_freeinfo(struct fi_info *info) { (void)info; }
struct fi_info *fi_dupinfo(const struct fi_info *info)
{
    (void)info;
    return NULL;
}
int fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    (void)attr, (void)fabric, (void)context;
    return -38; /* -FI_ENOSYS */
}
const char *fi_strerror(int err)
{
    (void)err;
    return "fake libfabric";
}
uint32_t fi_version(void)
{
    unsigned major = 1, minor = 17;
    const char *v = getenv("FAKE_FI_VERSION");
    if (v)
        sscanf(v, "%u.%u", &major, &minor);
    return (major << 16) | minor;
}

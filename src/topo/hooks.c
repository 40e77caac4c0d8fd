/* hooks.c - the real NVLink, CUDA and verbs hooks of the topology and the
 * doctor, wired to the run-time loaders of libcuda.so.1 and libibverbs.so.1
 * when this build has them.  Without a loader the hook stays NULL and the
 * reason is what the doctor prints for the checks that needed it. */
#include <string.h>

#include "topo/doctor.h"

void gw_topo_opts_default(gw_topo_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
}

void gw_doctor_env_default(gw_doctor_env_t *e)
{
    memset(e, 0, sizeof(*e));
    e->size = sizeof(*e);
    gw_topo_opts_default(&e->topo_opts);
    e->cuda_absent_why = "built without the CUDA driver loader (src/cuda)";
    e->verbs_absent_why = "built without the verbs loader (src/transport/verbs)";
    e->live_absent_why = "built without the live test (needs the CUDA and verbs loaders)";
}

/* SPDX-License-Identifier: Apache-2.0 */
/* report.c - the topology as text (nvidia-smi topo -m layout) and as JSON. */
#include <stdio.h>
#include <string.h>

#include "topo/topo.h"

void gw_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* Column label: GPUs by name, NICs as NIC# (the legend maps them). */
static void label(const gw_topo_t *t, int i, char *buf, size_t len)
{
    if (i < t->ngpu)
        snprintf(buf, len, "%s", t->dev[i].name);
    else
        snprintf(buf, len, "NIC%d", i - t->ngpu);
}

static void cell(const gw_topo_t *t, int i, int j, char *buf, size_t len)
{
    gw_topo_link_t l = t->link[i][j];
    if (l == GW_LINK_NV && t->nvlinks[i][j] > 0)
        snprintf(buf, len, "NV%d", t->nvlinks[i][j]);
    else
        snprintf(buf, len, "%s", gw_topo_link_name(l));
}

void gw_topo_print(const gw_topo_t *t, FILE *f)
{
    int n = t->ngpu + t->nnic;
    char b[32];
    fprintf(f, "Topology of %s: %d GPU(s), %d RDMA device(s)\n\n", t->root, t->ngpu, t->nnic);
    if (n == 0) {
        fprintf(f, "No NVIDIA GPU and no RDMA device found.\n");
    } else {
        fprintf(f, "%-8s", "");
        for (int j = 0; j < n; j++) {
            label(t, j, b, sizeof(b));
            fprintf(f, "%-7s", b);
        }
        fprintf(f, " %-14s %-6s %s\n", "CPU Affinity", "NUMA", "PCI");
        for (int i = 0; i < n; i++) {
            label(t, i, b, sizeof(b));
            fprintf(f, "%-8s", b);
            for (int j = 0; j < n; j++) {
                cell(t, i, j, b, sizeof(b));
                fprintf(f, "%-7s", b);
            }
            char numa[16];
            if (t->dev[i].numa >= 0)
                snprintf(numa, sizeof(numa), "%d", t->dev[i].numa);
            else
                snprintf(numa, sizeof(numa), "N/A");
            fprintf(f, " %-14s %-6s %s\n", t->dev[i].cpulist[0] ? t->dev[i].cpulist : "N/A", numa,
                    t->dev[i].bdf[0] ? t->dev[i].bdf : "none");
        }
        fprintf(f, "\nLegend:\n"
                   "  X    = Self\n"
                   "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
                   "  NODE = Connection traversing PCIe and the interconnect between host bridges within a NUMA node\n"
                   "  PHB  = Connection traversing PCIe and a PCIe host bridge (typically the CPU)\n"
                   "  PXB  = Connection traversing multiple PCIe bridges (without the host bridge)\n"
                   "  PIX  = Connection traversing at most a single PCIe bridge (a switch counts as one)\n"
                   "  NV#  = Connection traversing # NVLinks (NV: NVLink, count unknown)\n"
                   "  ?    = Unknown (see the notes below)\n");
        if (t->nnic) {
            fprintf(f, "\nNIC Legend:\n");
            for (int k = 0; k < t->nnic; k++) {
                const gw_topo_dev_t *d = &t->dev[t->ngpu + k];
                fprintf(f, "  NIC%d: %s [%s]", k, d->name, d->fabric[0] ? d->fabric : "?");
                for (int x = 0; x < d->nnetdevs; x++)
                    fprintf(f, "%s%s", x ? "," : " (", d->netdevs[x]);
                if (d->nnetdevs)
                    fprintf(f, ")");
                for (int p = 0; p < d->nports; p++) {
                    const gw_topo_port_t *pt = &d->ports[p];
                    fprintf(f, "  port %d %s %s", pt->num, pt->state_str[0] ? pt->state_str : "?",
                            pt->link_layer[0] ? pt->link_layer : "?");
                }
                fprintf(f, "\n");
            }
        }
        if (t->ngpu) {
            fprintf(f, "\nNearest NIC (default RDMA device for memory on each GPU):\n");
            for (int g = 0; g < t->ngpu; g++) {
                fprintf(f, "  %s %s: ", t->dev[g].name, t->dev[g].bdf);
                if (!t->nnearest[g])
                    fprintf(f, "none%s\n", t->nnic ? " (no NIC with a known path)" : "");
                for (int x = 0; x < t->nnearest[g]; x++) {
                    int k = t->nearest[g][x];
                    fprintf(f, "%s%s", x ? ", " : "", t->dev[k].name);
                    if (x == t->nnearest[g] - 1)
                        fprintf(f, " (%s)\n", gw_topo_link_name(t->link[g][k]));
                }
            }
        }
    }
    int notes = t->note[0] != 0;
    for (int i = 0; i < n; i++) {
        notes |= t->dev[i].note[0] != 0;
        for (int p = 0; p < t->dev[i].nports; p++)
            notes |= t->dev[i].ports[p].note[0] != 0;
    }
    if (notes) {
        fprintf(f, "\nNotes:\n");
        if (t->note[0])
            fprintf(f, "  %s\n", t->note);
        for (int i = 0; i < n; i++) {
            if (t->dev[i].note[0])
                fprintf(f, "  %s: %s\n", t->dev[i].name, t->dev[i].note);
            for (int p = 0; p < t->dev[i].nports; p++)
                if (t->dev[i].ports[p].note[0])
                    fprintf(f, "  %s port %d: %s\n", t->dev[i].name, t->dev[i].ports[p].num,
                            t->dev[i].ports[p].note);
        }
    }
}

static void json_dev(const gw_topo_t *t, const gw_topo_dev_t *d, FILE *f)
{
    fprintf(f, "{\"name\":");
    gw_json_str(f, d->name);
    fprintf(f, ",\"pci\":");
    gw_json_str(f, d->bdf);
    fprintf(f, ",\"root_complex\":");
    gw_json_str(f, d->root_complex);
    fprintf(f, ",\"numa\":%d,\"cpulist\":", d->numa);
    gw_json_str(f, d->cpulist);
    fprintf(f, ",\"driver\":");
    gw_json_str(f, d->driver);
    fprintf(f, ",\"bridges\":[");
    for (int k = 0; k < d->nchain; k++) {
        fprintf(f, "%s", k ? "," : "");
        gw_json_str(f, d->chain[k].bdf);
    }
    fprintf(f, "]");
    if (d->kind == GW_TOPO_GPU) {
        fprintf(f, ",\"bar1_bytes\":%llu", (unsigned long long)d->bar1_size);
    } else {
        fprintf(f, ",\"fabric\":");
        gw_json_str(f, d->fabric);
        fprintf(f, ",\"netdevs\":[");
        for (int x = 0; x < d->nnetdevs; x++) {
            fprintf(f, "%s", x ? "," : "");
            gw_json_str(f, d->netdevs[x]);
        }
        fprintf(f, "],\"ports\":[");
        for (int p = 0; p < d->nports; p++) {
            const gw_topo_port_t *pt = &d->ports[p];
            fprintf(f, "%s{\"port\":%d,\"state\":", p ? "," : "", pt->num);
            gw_json_str(f, pt->state_str);
            fprintf(f, ",\"phys_state\":");
            gw_json_str(f, pt->phys_state_str);
            fprintf(f, ",\"link_layer\":");
            gw_json_str(f, pt->link_layer);
            fprintf(f, ",\"rate\":");
            gw_json_str(f, pt->rate);
            fprintf(f, ",\"netdev\":");
            gw_json_str(f, pt->netdev);
            fprintf(f, ",\"netdev_mtu\":%d,\"gids\":%d,\"rocev2_gids\":%d,\"note\":", pt->netdev_mtu,
                    pt->n_gids, pt->n_rocev2);
            gw_json_str(f, pt->note);
            fprintf(f, "}");
        }
        fprintf(f, "]");
    }
    fprintf(f, ",\"note\":");
    gw_json_str(f, d->note);
    fprintf(f, "}");
    (void)t;
}

void gw_topo_print_json(const gw_topo_t *t, FILE *f)
{
    int n = t->ngpu + t->nnic;
    char b[32];
    fprintf(f, "{\"sysfs_root\":");
    gw_json_str(f, t->root);
    fprintf(f, ",\"numa_nodes\":%d,\"gpus\":[", t->nnodes);
    for (int i = 0; i < t->ngpu; i++) {
        fprintf(f, "%s", i ? "," : "");
        json_dev(t, &t->dev[i], f);
    }
    fprintf(f, "],\"nics\":[");
    for (int i = t->ngpu; i < n; i++) {
        fprintf(f, "%s", i > t->ngpu ? "," : "");
        json_dev(t, &t->dev[i], f);
    }
    fprintf(f, "],\"matrix\":{\"devices\":[");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s", i ? "," : "");
        gw_json_str(f, t->dev[i].name);
    }
    fprintf(f, "],\"rows\":[");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s[", i ? "," : "");
        for (int j = 0; j < n; j++) {
            cell(t, i, j, b, sizeof(b));
            fprintf(f, "%s", j ? "," : "");
            gw_json_str(f, b);
        }
        fprintf(f, "]");
    }
    fprintf(f, "]},\"nearest_nic\":{");
    for (int g = 0; g < t->ngpu; g++) {
        fprintf(f, "%s", g ? "," : "");
        gw_json_str(f, t->dev[g].name);
        fprintf(f, ":[");
        for (int x = 0; x < t->nnearest[g]; x++) {
            fprintf(f, "%s", x ? "," : "");
            gw_json_str(f, t->dev[t->nearest[g][x]].name);
        }
        fprintf(f, "]");
    }
    fprintf(f, "},\"note\":");
    gw_json_str(f, t->note);
    fprintf(f, "}\n");
}

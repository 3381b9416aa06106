// SPDX-License-Identifier: MIT
/*
 * Test-only fault injection for test-faults.sh, loaded into vpackd with
 * LD_PRELOAD (as kmod's testsuite does): it interposes the libvirt calls
 * that pin a thread (adapters/virt.c: virDomainPinVcpuFlags,
 * virDomainPinEmulator, virDomainPinIOThread) and can hold one of them.
 *
 * With VPACK_TEST_PIN_GATE=DIR in the environment, a pin call that finds
 * DIR/arm (empty, or naming its domain) removes it, writes "DOMAIN THREAD"
 * to DIR/paused and holds the whole agent there, after sampling and
 * planning and before libvirt is asked, until DIR/paused is removed (at
 * most 60 s). The test destroys a domain or takes a CPU offline in that
 * window. "DOMAIN after" in DIR/arm holds the agent right after libvirt
 * pinned that thread instead (the test kills vpackd there: a pin done, what
 * follows it not). Without the variable, or with no arm file, the call goes
 * straight to libvirt.
 *
 * It also interposes virDomainSetMetadata: while DIR/refuse-metadata exists
 * and names the domain (or is empty), a write of vpack's request
 * (urn:vpack:request:1) fails without reaching libvirt, as a libvirtd that
 * refuses it would, and "DOMAIN" is appended to DIR/metadata-refused, one
 * line per refused call, for the test to count.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

/*
 * Holds the caller if the gate is armed for domain name, before the pin (after
 * false) or after it (after true, "DOMAIN after" in the arm file); label
 * names the thread.
 */
static void gate(const char *name, const char *label, bool after)
{
    const char *dir = getenv("VPACK_TEST_PIN_GATE");
    char arm[4200], paused[4200], tmp[4210], only[256] = "";
    FILE *f;

    if (!dir || !*dir || !name)
        return;
    snprintf(arm, sizeof(arm), "%s/arm", dir);
    if (!(f = fopen(arm, "r")))
        return;
    if (!fgets(only, sizeof(only), f))
        only[0] = '\0';
    fclose(f);
    only[strcspn(only, "\n")] = '\0';
    char *mode = strchr(only, ' ');
    if (mode)
        *mode++ = '\0';
    if ((mode && !strcmp(mode, "after")) != after)
        return;
    if ((only[0] && strcmp(only, name)) || unlink(arm) < 0)
        return;
    snprintf(paused, sizeof(paused), "%s/paused", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", paused);
    f = fopen(tmp, "w");
    if (!f || fprintf(f, "%s %s\n", name, label) < 0 || fclose(f) != 0 || rename(tmp, paused) < 0) {
        fprintf(stderr, "pin-gate: cannot write %s\n", paused);
        return;
    }
    fprintf(stderr, "pin-gate: holding the pin of domain %s %s (%s libvirt's) until %s is removed\n",
            name, label, after ? "after" : "before", paused);
    for (int i = 0; i < 600 && access(paused, F_OK) == 0; i++)
        usleep(100 * 1000);
    fprintf(stderr, "pin-gate: going on with the pin of domain %s %s\n", name, label);
}

/*
 * The domain's name, asked before the pin: no libvirt call may follow a
 * failed pin (each API call resets the thread's last error, which
 * vpackd reads after it).
 */
static const char *gate_name(virDomainPtr dom)
{
    const char *dir = getenv("VPACK_TEST_PIN_GATE");
    return dir && *dir ? virDomainGetName(dom) : NULL;
}

/* The real libvirt function name, or abort: a shim that cannot pass calls on is useless. */
static void *real(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);
    if (!fn) {
        fprintf(stderr, "pin-gate: no %s after the shim: %s\n", name, dlerror());
        abort();
    }
    return fn;
}

int virDomainPinVcpuFlags(virDomainPtr dom, unsigned int vcpu, unsigned char *cpumap, int maplen,
                          unsigned int flags)
{
    static int (*fn)(virDomainPtr, unsigned int, unsigned char *, int, unsigned int);
    char label[32];
    if (!fn)
        *(void **)&fn = real("virDomainPinVcpuFlags");
    snprintf(label, sizeof(label), "vcpu %u", vcpu);
    const char *name = gate_name(dom);
    gate(name, label, false);
    int r = fn(dom, vcpu, cpumap, maplen, flags);
    gate(name, label, true);
    return r;
}

int virDomainPinEmulator(virDomainPtr dom, unsigned char *cpumap, int maplen, unsigned int flags)
{
    static int (*fn)(virDomainPtr, unsigned char *, int, unsigned int);
    if (!fn)
        *(void **)&fn = real("virDomainPinEmulator");
    const char *name = gate_name(dom);
    gate(name, "emulator", false);
    int r = fn(dom, cpumap, maplen, flags);
    gate(name, "emulator", true);
    return r;
}

/* Whether DIR/refuse-metadata names domain name (or is empty); logs the refusal. */
static bool refuse_metadata(const char *name)
{
    const char *dir = getenv("VPACK_TEST_PIN_GATE");
    char path[4200], only[256] = "";
    FILE *f;

    if (!dir || !*dir || !name)
        return false;
    snprintf(path, sizeof(path), "%s/refuse-metadata", dir);
    if (!(f = fopen(path, "r")))
        return false;
    if (!fgets(only, sizeof(only), f))
        only[0] = '\0';
    fclose(f);
    only[strcspn(only, "\n")] = '\0';
    if (only[0] && strcmp(only, name))
        return false;
    snprintf(path, sizeof(path), "%s/metadata-refused", dir);
    if ((f = fopen(path, "a"))) {
        fprintf(f, "%s\n", name);
        fclose(f);
    }
    return true;
}

int virDomainSetMetadata(virDomainPtr dom, int type, const char *metadata, const char *key,
                         const char *uri, unsigned int flags)
{
    static int (*fn)(virDomainPtr, int, const char *, const char *, const char *, unsigned int);
    if (!fn)
        *(void **)&fn = real("virDomainSetMetadata");
    if (metadata && uri && !strcmp(uri, "urn:vpack:request:1") && refuse_metadata(gate_name(dom)))
        return -1;
    return fn(dom, type, metadata, key, uri, flags);
}

int virDomainPinIOThread(virDomainPtr dom, unsigned int iothread_id, unsigned char *cpumap,
                         int maplen, unsigned int flags)
{
    static int (*fn)(virDomainPtr, unsigned int, unsigned char *, int, unsigned int);
    char label[32];
    if (!fn)
        *(void **)&fn = real("virDomainPinIOThread");
    snprintf(label, sizeof(label), "iothread %u", iothread_id);
    const char *name = gate_name(dom);
    gate(name, label, false);
    int r = fn(dom, iothread_id, cpumap, maplen, flags);
    gate(name, label, true);
    return r;
}

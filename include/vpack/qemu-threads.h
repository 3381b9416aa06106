/* SPDX-License-Identifier: MIT */
/* What QEMU's thread names (/proc/PID/task/TID/comm) say a thread runs. */
#ifndef VPACK_QEMU_THREADS_H
#define VPACK_QEMU_THREADS_H

/* The kernel keeps the first 15 bytes of a thread's name (TASK_COMM_LEN - 1). */
#define VPACK_COMM_MAX 15

/*
 * QEMU started with "-name ...,debug-threads=on" (libvirt always asks for
 * it) names its threads: "CPU 3/KVM" ("CPU 3/TCG", ...) is a vCPU thread,
 * "ALL CPUs/TCG" runs every vCPU (single-threaded TCG), "IO <id>" runs the
 * iothread object <id>, or the monitor's ("IO mon_iothread"). Anything
 * else (the main thread, "call_rcu", "worker", ...) is OTHER.
 */
enum vpack_qemu_thread { VPACK_QEMU_OTHER, VPACK_QEMU_VCPU, VPACK_QEMU_IOTHREAD };
/* The kind of a thread named comm (no newline); *vcpu is the vCPU (-1: all) for VCPU. */
enum vpack_qemu_thread vpack_qemu_thread_kind(const char *comm, int *vcpu);

/*
 * Which of libvirt's iothreads a thread named comm runs: libvirt creates
 * iothread N as "-object iothread,id=iothreadN", so QEMU names it "IO
 * iothreadN", cut to VPACK_COMM_MAX bytes (ids from 10000 up are cut).
 * Returns the index in ids[] whose name comm is, -1 for none, -2 when
 * the cut name is that of more than one of ids[] (1000 and 10000 both read
 * "IO iothread1000").
 */
int vpack_qemu_iothread_match(const char *comm, const unsigned *ids, unsigned n);

#endif

// Package proctask reads this process's threads from /proc/self/task: the
// io-wq workers of a thread and a thread's allowed CPUs. It is imported by
// tests only.
package proctask

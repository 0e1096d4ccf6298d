package host

// Cgroup returns pid's cgroup v2 path as /proc/PID/cgroup shows it ("/"
// for the root), "" if the process is gone or not in cgroup v2.
func Cgroup(pid int) string {
	p, _ := cgroupOf(pid)
	return p
}

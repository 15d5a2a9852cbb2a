//go:build unix

package app

import "syscall"

// raiseFileLimit raises the soft limit of open files to the hard limit and returns it. Go's
// runtime does so itself at start (since 1.19); doing it here makes the limit known to the
// connection reserve, whatever the runtime did. 0 means unknown.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		} else if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return uint64(lim.Cur), nil
}

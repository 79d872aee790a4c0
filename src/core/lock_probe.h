// Whether a file lock is held, told without taking it. The report asks this of a run dir's
// .lock (core/run_dir_lock.h) to tell a live run from a dead one whose pid was reused by another
// process: a pid alone cannot say, the lock can (the kernel drops it when its holder dies).
// Taking the lock to find out, even for an instant, could refuse a run that starts just then,
// so the kernel's table of locks (/proc/locks) is read instead.
#pragma once
#include <optional>
#include <string>

namespace lmtrain::core {

// True when some process holds an flock on `path`, false when none does; nullopt when that
// cannot be told (the file is absent, or /proc/locks cannot be read: not Linux).
std::optional<bool> flock_held(const std::string& path);

// The same from the text of /proc/locks and the file's inode (tests). The inode number alone is
// matched: the device /proc/locks names is the filesystem's own, which stat() reports otherwise
// on overlay filesystems (containers); a clash with another filesystem's inode errs towards
// "held", the answer the pid alone gave before.
bool flock_listed(const std::string& proc_locks, unsigned long long inode);

}  // namespace lmtrain::core

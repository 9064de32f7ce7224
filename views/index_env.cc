// index_env.cc — LevelDB's environment with table files read by pread(2)
// (index_env.h says why). The only C++ of the project: LevelDB's
// environment is a C++ class, and its C API takes no other.
#include "views/index_env.h"

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include <leveldb/env.h>

// The C API's environment handle, completed here as leveldb's c.cc
// defines it (leveldb 1.20 to 1.23): the environment, and whether it is
// the default one. leveldb_options_set_env() reads only `rep`. The handle
// is made and freed here, never by leveldb_env_destroy().
struct leveldb_env_t {
	leveldb::Env *rep;
	bool is_default;
};

namespace {

class PreadFile final : public leveldb::RandomAccessFile {
public:
	PreadFile(const std::string &name, int fd) : name_(name), fd_(fd) {}
	~PreadFile() override { close(fd_); }

	leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice *result,
			     char *scratch) const override
	{
		size_t done = 0;
		while (done < n) {
			ssize_t got = pread(fd_, scratch + done, n - done,
					    static_cast<off_t>(offset + done));
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0) {
				int e = errno;
				*result = leveldb::Slice(scratch, 0);
				return leveldb::Status::IOError(name_, std::strerror(e));
			}
			if (got == 0)
				break;   // past the end: a short read, as LevelDB's own
			done += static_cast<size_t>(got);
		}
		*result = leveldb::Slice(scratch, done);
		return leveldb::Status::OK();
	}

private:
	std::string name_;
	int fd_;
};

class PreadEnv final : public leveldb::EnvWrapper {
public:
	PreadEnv() : EnvWrapper(leveldb::Env::Default()) {}

	leveldb::Status NewRandomAccessFile(const std::string &name,
					    leveldb::RandomAccessFile **out) override
	{
		*out = nullptr;
		int fd = open(name.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			return e == ENOENT ? leveldb::Status::NotFound(name, std::strerror(e))
					   : leveldb::Status::IOError(name, std::strerror(e));
		}
		*out = new (std::nothrow) PreadFile(name, fd);
		if (!*out) {
			close(fd);
			return leveldb::Status::IOError(name, "out of memory");
		}
		return leveldb::Status::OK();
	}
};

} // namespace

extern "C" leveldb_env_t *index_env_new(void)
{
	PreadEnv *env = new (std::nothrow) PreadEnv();
	leveldb_env_t *h = env ? new (std::nothrow) leveldb_env_t{ env, false } : nullptr;
	if (!h)
		delete env;
	return h;
}

extern "C" void index_env_free(leveldb_env_t *h)
{
	if (!h)
		return;
	delete static_cast<PreadEnv *>(h->rep);
	delete h;
}

#pragma once
// The SQL stores' read connections (sql_store.cc): at most kMaxReaders,
// opened when first needed, each lent for one read and returned. Internal
// to src/store.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "store/sql_store.h"

namespace unisched::store {

inline constexpr int kMaxReaders = 4;

class ReaderPool {
 public:
  explicit ReaderPool(ConnectionFactory open) : open_connection_(std::move(open)) {}

  // A read connection held for one read; returned to the pool on destruction.
  class Lease {
   public:
    Lease(ReaderPool* pool, std::unique_ptr<Connection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_) pool_->Release(std::move(conn_));
    }
    Connection& operator*() const { return *conn_; }

   private:
    ReaderPool* pool_;
    std::unique_ptr<Connection> conn_;
  };

  Result<Lease> Acquire() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !idle_.empty() || open_ < kMaxReaders; });
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(conn));
    }
    ++open_;
    lock.unlock();
    auto conn = open_connection_();
    if (!conn.ok()) {
      lock.lock();
      --open_;
      cv_.notify_one();
      return conn.error();
    }
    return Lease(this, std::move(*conn));
  }

 private:
  void Release(std::unique_ptr<Connection> conn) {
    {
      std::lock_guard lock(mu_);
      idle_.push_back(std::move(conn));
    }
    cv_.notify_one();
  }

  const ConnectionFactory open_connection_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Connection>> idle_;
  int open_ = 0;
};

}  // namespace unisched::store

#pragma once
// libpq's entry points, opened when the first PostgreSQL connection is made
// rather than linked: with its own dependencies (Kerberos, LDAP, ...) it
// cost every process about 5 ms to load and relocate, a CLI command and a
// trace replay too, though only a daemon on a PostgreSQL store uses it
// (docs/benchmarks.md, "Start-up"). Private to the store, as pg_db.h is.

#include <libpq-fe.h>

#include "unisched/common/status.h"

namespace unisched::store {

// Every libpq function the store calls, each listed once: the struct's
// members and the loader's lookups are made from this list.
#define UNISCHED_LIBPQ_FUNCTIONS(X) \
  X(PQclear)                        \
  X(PQcmdTuples)                    \
  X(PQconnectdbParams)              \
  X(PQenterPipelineMode)            \
  X(PQerrorMessage)                 \
  X(PQexec)                         \
  X(PQexecPrepared)                 \
  X(PQexitPipelineMode)             \
  X(PQfinish)                       \
  X(PQgetResult)                    \
  X(PQgetisnull)                    \
  X(PQgetlength)                    \
  X(PQgetvalue)                     \
  X(PQntuples)                      \
  X(PQpipelineSync)                 \
  X(PQprepare)                      \
  X(PQreset)                        \
  X(PQresultErrorField)             \
  X(PQresultErrorMessage)           \
  X(PQresultStatus)                 \
  X(PQsendPrepare)                  \
  X(PQsendQueryPrepared)            \
  X(PQsetNoticeProcessor)           \
  X(PQstatus)                       \
  X(PQtransactionStatus)

// The functions, typed as libpq-fe.h declares them: called as Pq()->PQexec(...).
struct LibPq {
#define UNISCHED_LIBPQ_MEMBER(name) decltype(&::name) name = nullptr;
  UNISCHED_LIBPQ_FUNCTIONS(UNISCHED_LIBPQ_MEMBER)
#undef UNISCHED_LIBPQ_MEMBER
};

// libpq, opened on the first call (thread-safe); every later call gives the
// same answer: the functions, or an Unavailable error saying what to install.
// Only code holding a connection may use Pq()-> without checking ok().
const Result<LibPq>& Pq();

}  // namespace unisched::store

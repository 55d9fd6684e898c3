// Fuzz target: the job JSON decoders. The input is a JSON text, read two ways:
//  - as the body of POST /v1/jobs: body::ParseObject (the API's body
//    parser) then ParseSubmission (src/api/submission.cc), as the endpoint
//    does;
//  - as a stored job document: codec::JobFromJson (src/codec/job_json.cc),
//    what the store decodes every job with. An accepted job must then keep
//    the codec's promises (job_json.h): JobDocument() writes the bytes of
//    JobToJson().dump(), and JobFromJson(JobToJson(job)) gives the job back.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/body.h"
#include "api/submission.h"
#include "fuzz_check.h"
#include "unisched/codec/job_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  auto body = unisched::api::body::ParseObject(text, R"({"workload": {"kind": "hpc"}, "command": ["true"]})");
  if (body.ok()) (void)unisched::api::ParseSubmission(*body);

  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  auto job = unisched::codec::JobFromJson(doc);
  if (!job.ok()) return 0;
  const std::string document = unisched::codec::JobDocument(*job);
  const nlohmann::json encoded = unisched::codec::JobToJson(*job);
  FUZZ_CHECK(document == encoded.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  auto again = unisched::codec::JobFromJson(encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(unisched::codec::JobDocument(*again) == document);
  return 0;
}

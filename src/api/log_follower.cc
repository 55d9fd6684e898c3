// LogFollower: see log_follower.h.

#include "api/log_follower.h"

#include <utility>

namespace unisched::api {

BodySource::Piece LogFollower::Next() {
  Piece piece;
  piece.data = read_(LogRange{offset_, kPieceBytes});
  if (piece.data.empty() && !writer_ended_ && !live_()) {
    writer_ended_ = true;
    piece.data = read_(LogRange{offset_, kPieceBytes});
  }
  offset_ += piece.data.size();
  piece.done = writer_ended_ && piece.data.empty();
  return piece;
}

}  // namespace unisched::api

#pragma once
// A vector of at most N elements stored inline: the per-call plans of the op
// layer (a few inputs, one to three outputs) cost no heap allocation, which
// matters on the path every small op takes.

#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <utility>

namespace pyflame {

template <class T, size_t N> class InlineVector {
 public:
  InlineVector() = default;
  InlineVector(std::initializer_list<T> items) {
    for (const T& t : items) push_back(t);
  }
  void push_back(T t) {
    if (size_ == N) throw std::length_error("InlineVector: more than its capacity of elements");
    items_[size_++] = std::move(t);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T* begin() { return items_; }
  T* end() { return items_ + size_; }
  const T* begin() const { return items_; }
  const T* end() const { return items_ + size_; }

 private:
  T items_[N] = {};
  size_t size_ = 0;
};

}  // namespace pyflame

#pragma once
// A vector of at most N elements stored inline: the per-call plans of the op
// layer (a few inputs, one to four outputs) cost no heap allocation, which
// matters on the path every small op takes. Only the elements pushed are
// constructed, so unused capacity costs nothing.

#include <cstddef>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <utility>

namespace pyflame {

template <class T, size_t N> class InlineVector {
 public:
  InlineVector() = default;
  InlineVector(std::initializer_list<T> items) {
    for (const T& t : items) push_back(t);
  }
  InlineVector(const InlineVector& o) {
    for (const T& t : o) push_back(t);
  }
  InlineVector(InlineVector&& o) noexcept {
    for (T& t : o) new (slot(size_++)) T(std::move(t));
  }
  InlineVector& operator=(const InlineVector& o) {
    if (this != &o) {
      clear();
      for (const T& t : o) push_back(t);
    }
    return *this;
  }
  InlineVector& operator=(InlineVector&& o) noexcept {
    if (this != &o) {
      clear();
      for (T& t : o) new (slot(size_++)) T(std::move(t));
    }
    return *this;
  }
  ~InlineVector() { clear(); }

  void push_back(T t) {
    if (size_ == N) throw std::length_error("InlineVector: more than its capacity of elements");
    new (slot(size_)) T(std::move(t));
    ++size_;
  }
  void clear() {
    for (size_t i = 0; i < size_; ++i) begin()[i].~T();
    size_ = 0;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return begin()[i]; }
  const T& operator[](size_t i) const { return begin()[i]; }
  T* begin() { return std::launder(reinterpret_cast<T*>(storage_)); }
  T* end() { return begin() + size_; }
  const T* begin() const { return std::launder(reinterpret_cast<const T*>(storage_)); }
  const T* end() const { return begin() + size_; }

 private:
  void* slot(size_t i) { return storage_ + i * sizeof(T); }

  alignas(T) unsigned char storage_[N * sizeof(T)];
  size_t size_ = 0;
};

}  // namespace pyflame
